"""spark-submit entry point: run an ``ordered-agg`` job described by a TOML config.

Usage (from the repository root; ``SPARK_CONF_DIR=$PWD/conf`` gives the quiet logging of
``conf/log4j2.properties`` and the settings of ``conf/spark-defaults.conf``)::

    JOBS=$(python -c 'import os, spark_stream_sched.jobs as j; print(os.path.dirname(j.__file__))')
    SPARK_CONF_DIR=$PWD/conf PYSPARK_PYTHON=$(which python) \
        spark-submit "$JOBS/ordered_agg_job.py" --conf conf/smart_grid.toml

The master comes from ``spark-submit`` (``--master``; local[*] by default). One line is printed
per committed micro-batch (``--quiet`` turns that off), then rows of one result window and a
summary. Exit code 0 on success, 2 with a one-line message for a bad config, input or failed
query.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--conf``/``--engine``, run the job, print its table and summary."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    parser = argparse.ArgumentParser(prog="ordered_agg_job.py", description=__doc__.splitlines()[0])
    parser.add_argument("--conf", required=True, help="TOML job config, e.g. conf/smart_grid.toml")
    parser.add_argument("--engine", choices=("source", "sink", "runtime"),
                        help="override [job] engine")
    parser.add_argument("--quiet", action="store_true", help="no line per micro-batch")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from spark_stream_sched.errors import SparkStreamSchedError
    from spark_stream_sched.jobs.config import load_job_config
    from spark_stream_sched.jobs.results import print_report
    from spark_stream_sched.jobs.runner import run_job

    try:
        cfg = load_job_config(args.conf)
        if args.engine:
            cfg = cfg.with_engine(args.engine)
        result = run_job(cfg, master=None, progress=not args.quiet)
    except SparkStreamSchedError as exc:
        print(f"ordered_agg_job: error: {exc}", file=sys.stderr)
        return 2
    print_report(result, cfg.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
