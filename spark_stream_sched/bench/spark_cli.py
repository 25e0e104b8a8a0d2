"""``bench spark``'s command line: flags, the ``Bench`` entry and ``python -m``.

The queries are in :mod:`.spark_native`, the cases in :mod:`.spark_bench` (imported when a run
starts, so ``--help`` and bad flags answer without loading Spark).

``--quick`` is a smoke run of one Spark session: :data:`QUICK_ENGINES` on 4,000 rows of 2
inputs and 20 keys, batchings 16 and 8 files per input per micro-batch (one micro-batch, then
two), one timed run, no warm-up, no long case and no cores case (each of its masters would start
a JVM of its own). Every engine's output is still checked against the truth, in both
batchings. A flag given beside ``--quick`` wins (``--engines``, ``--cores 1,2``, ...).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from spark_stream_sched.bench.common import pick
from spark_stream_sched.bench.spark_cases import ENGINES, Record
from spark_stream_sched.bench.spark_model import PROJECT_CORES
from spark_stream_sched.errors import ConfigError

#: ``--quick``'s engines: the source and the sink, in one session (each engine more takes 10-35
#: s on 2 loaded cores: its first query in the JVM, then batching B). ``make test-bench`` runs
#: every engine on tiny data (tests/spark/test_bench_spark_engines.py).
QUICK_ENGINES = ("ordered-agg", "ordered-agg-sink")


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench spark`` beyond the shared ``--rows``/``--repeat``/``--json``/``--seed``."""
    parser.add_argument("--inputs", type=int, default=None,
                        help="input streams (default 8; --quick: 2)")
    parser.add_argument("--keys", type=int, default=None,
                        help="distinct keys (default 1000; --quick: 20)")
    parser.add_argument("--window", default="30 seconds", help="window size (default 30 s)")
    parser.add_argument("--slide", default="3 seconds", help="slide (default 3 s)")
    parser.add_argument("--watermark", default="10 seconds",
                        help="native watermark delay (default 10 seconds)")
    parser.add_argument("--batchings", default=None,
                        help="files per input per micro-batch for runs A and B (default 4,1; "
                             "--quick: 16,8)")
    parser.add_argument("--engines", default=None,
                        help=f"comma-separated subset of {', '.join(ENGINES)} (default: all; "
                             f"--quick: {','.join(QUICK_ENGINES)})")
    parser.add_argument("--workdir", help="keep data and outputs here (default: temp, removed)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--long-rows", type=int, default=None,
                        help="rows of the long-stream case (default 8,000,000; 0: skip; "
                             "--quick: skip)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="untimed rounds of every engine before the timed ones (default 1; "
                             "--quick: 0)")
    parser.add_argument("--cores", default=None,
                        help="executor cores of the scaling runs, each local[n] in a process "
                             "of its own (default 1,2; 0 or --quick: skip); local[1] gives the "
                             "scaling model its inputs")
    parser.add_argument("--project-cores", default=",".join(map(str, PROJECT_CORES)),
                        help="executor cores the scaling model projects the throughput to "
                             f"(default {','.join(map(str, PROJECT_CORES))})")
    parser.add_argument("--cluster", metavar="MASTER_URL",
                        help="also run the source, ordered() and the sink on this running "
                             "standalone master (spark://host:port; the input files must be "
                             "readable by its executors) and compare with the model")
    parser.add_argument("--cluster-cores", type=int, default=2,
                        help="executor cores to take from --cluster (default 2)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="the source's numPartitions: Spark tasks per micro-batch "
                             "(default: the source's own, 2)")


def run_bench(args: argparse.Namespace) -> list[Record]:
    """``bench spark`` entry: ``--rows`` (default 2 M; ``--quick`` 4 k), ``--repeat`` runs."""
    quick = getattr(args, "quick", False)
    a, b = _ints("--batchings", pick(args, "batchings", "4,1", "16,8"), 2)
    text = pick(args, "engines", ",".join(ENGINES), ",".join(QUICK_ENGINES))
    engines = [e.strip() for e in str(text).split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown or not engines:
        raise ConfigError(f"--engines {text!r}: choose from {', '.join(ENGINES)}")
    cores = [n for n in _ints("--cores", pick(args, "cores", "1,2", "0"), None) if n]
    project = _ints("--project-cores", getattr(args, "project_cores", "4,16,64"), None)
    cluster = getattr(args, "cluster", None)
    cluster_cores = getattr(args, "cluster_cores", 2)
    if 0 in project:
        raise ConfigError(f"--project-cores {args.project_cores!r}: core counts must be >= 1")
    if cluster is not None and not str(cluster).startswith("spark://"):
        raise ConfigError(f"--cluster {cluster!r}: expected a standalone master URL like "
                          f"spark://127.0.0.1:7077")
    if cluster_cores < 1:
        raise ConfigError(f"--cluster-cores {cluster_cores}: must be >= 1")
    partitions = getattr(args, "partitions", None)
    if partitions is not None and partitions < 1:
        raise ConfigError(f"--partitions {partitions}: must be >= 1")
    from spark_stream_sched.bench.spark_bench import run

    return run(rows=args.rows or (4_000 if quick else 2_000_000),
               n_inputs=pick(args, "inputs", 8, 2), keys=pick(args, "keys", 1000, 20),
               size=args.window, slide=args.slide, watermark=args.watermark,
               runs=args.repeat or (1 if quick else 3), batchings=(a, b), seed=args.seed,
               workdir=args.workdir, master=args.master,
               show_progress=not getattr(args, "no_progress", False), engines=engines,
               long_rows=_count(args, "long_rows", 8_000_000), cores=cores,
               warmup=_count(args, "warmup", 1), cluster=cluster, cluster_cores=cluster_cores,
               project=project, partitions=partitions)


def _ints(flag: str, text: str, count: int | None) -> list[int]:
    """``"4,1"`` as integers >= 0 (exactly ``count`` of them unless None); ConfigError if not."""
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0 or (count is not None and len(values) != count):
        example = "4,1" if count == 2 else "1,2"
        raise ConfigError(f"{flag} {text!r}: expected non-negative integers like {example}")
    return values


def _count(args: argparse.Namespace, name: str, default: int) -> int:
    """Flag ``name`` (>= 0): ``default`` when not given, 0 with ``--quick``."""
    value = pick(args, name, default, 0)
    if value < 0:
        raise ConfigError(f"--{name.replace('_', '-')} {value}: must be >= 0")
    return int(value)


def _format(results: list[Record]) -> str:
    from spark_stream_sched.bench.spark_report import format_results

    return format_results(results)


#: ``Bench(*BENCH)`` in ``commands/bench.py``: help, add_args, run, format.
BENCH = ("Spark native (first() and min_by) vs the ordered-agg source, ordered() and the sink, "
         "with floors, end to end; scaling measured on 1-2 cores and projected",
         add_args, run_bench, _format)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_stream_sched.bench.spark_cli [--rows N] [--json [FILE]]``."""
    import logging

    from spark_stream_sched.bench.common import run_and_report

    parser = argparse.ArgumentParser(prog="spark_native", description=BENCH[0])
    parser.add_argument("--rows", type=int, default=None, help="rows (default 2,000,000)")
    parser.add_argument("--repeat", type=int, default=None, help="runs with batching A (3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: the source and the sink on 4,000 rows in one "
                             "session; its figures are not measurements")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE")
    add_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    run_and_report(lambda: run_bench(args), _format, args.json, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
