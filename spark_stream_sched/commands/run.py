"""``spark-stream-sched run <job>.toml``: run a job config on an embedded local Spark."""

from __future__ import annotations

import argparse
from typing import Any

from spark_stream_sched.jobs.config import ENGINES, load_job_config


def register(subparsers: Any) -> None:
    """Add the ``run`` sub-command."""
    parser = subparsers.add_parser(
        "run", help="run a job config (conf/<job>.toml) on an embedded local Spark",
        description="Run the ordered-agg job described by a TOML config: generate its inputs "
                    "if asked, run the query with Trigger.AvailableNow, write Parquet, print a "
                    "few result rows and a summary.")
    parser.add_argument("config", help="TOML job config, e.g. conf/smart_grid.toml")
    parser.add_argument("--engine", choices=ENGINES, help="override [job] engine")
    parser.add_argument("--master", help="Spark master (default: [job] master, local[*])")
    parser.add_argument("--show", type=int, help="result rows to print (default: [job] show)")
    parser.add_argument("--quiet", action="store_true", help="no line per micro-batch")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the job; return the exit code (errors propagate to the CLI as one line)."""
    from spark_stream_sched.jobs.results import print_report
    from spark_stream_sched.jobs.runner import run_job

    cfg = load_job_config(args.config)
    if args.engine:
        cfg = cfg.with_engine(args.engine)
    result = run_job(cfg, master=args.master or cfg.master, progress=not args.quiet)
    print_report(result, cfg.show if args.show is None else args.show)
    return 0
