"""``spark-stream-sched bench``: benchmarks of the runtime against per-tuple baselines.

Sub-commands (each prints a table, or JSON with ``--json``):

* ``bench merge``  -- S-Merge vs ``heapq.merge`` for 2, 8, 20 and 64 inputs.
* ``bench window`` -- Gulisano et al. (2016), Table 2 query shapes (and the smart-grid sliding
  query) on the
  runtime vs the MQ baseline.
* ``bench strategies`` -- the scheduling strategies in the simulator and on the executor.
* ``bench spark``  -- ``ordered-agg`` against Spark's native union + window + ``first()``.
* ``bench keyed``  -- a keyed operator on W threads: hybrid vs partitioned queue under key skew
  (Prasaad et al. 2018, §7.2.1), a clickstream pipeline per §6 heuristic, and the rows of
  ``bench/keyed_sessions.py`` (hooked in ``spark_stream_sched.bench.keyed._sessions_rows``).
* ``bench adaptation`` -- Liu & Rundensteiner (2005), figs 9, 11, 16, 21 on the runtime's 3-way
  join: disk
  adaptation, clean-up cost, distributed adaptation, lazy-disk vs active-disk.
* ``bench join``   -- the runtime's 2/3-way join alone vs a pandas merge and DuckDB.
* ``bench join-memory`` -- peak RSS of the join with and without a memory budget, each
  configuration in its own process.
* ``bench nexmark`` -- Nexmark queries on the runtime, the Spark source and native Spark, per
  CPU second of all processes, against DuckDB references (not in ``bench all``: 10 M events
  take most of an hour on 2 cores).
* ``bench all``    -- all of them but ``nexmark``, one after another.

To add a benchmark, write ``_add_<name>_args(parser)`` and ``_run_<name>(args) -> results`` and
register them in :data:`BENCHES`; the shared flags (``--rows``, ``--repeat``, ``--json``,
``--quick``, ``--seed``, ``--no-progress``) are added for every entry. ``--quick`` runs smoke-test
sizes and says so before the run and after the report
(:func:`~spark_stream_sched.bench.common.run_and_report`): its figures are not measurements.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_stream_sched.bench import adaptation as adaptation_bench
from spark_stream_sched.bench import join_alone as join_bench
from spark_stream_sched.bench import join_memory as join_memory_bench
from spark_stream_sched.bench import keyed as keyed_bench
from spark_stream_sched.bench import spark_cli
from spark_stream_sched.bench import strategies as strategies_bench
from spark_stream_sched.bench.common import pick
from spark_stream_sched.errors import ConfigError

Results = list[dict[str, Any]]


@dataclass(frozen=True)
class Bench:
    """One ``bench`` sub-command: its help, extra flags, runner and formatter."""

    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Results]
    format: Callable[[Results], str]


def _int_list(text: str) -> list[int]:
    """Parse ``"2,8,20"`` into ``[2, 8, 20]`` (argparse type)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 2,8,20, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


# -- merge ------------------------------------------------------------------------------------

def _add_merge_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", type=_int_list, default=None,
                        help="comma-separated input counts (default 2,8,20,64)")


def _run_merge(args: argparse.Namespace) -> Results:
    from spark_stream_sched.bench import merge

    return merge.run(
        input_counts=args.inputs or merge.DEFAULT_INPUT_COUNTS,
        rows=pick(args, "rows", 2_000_000, 20_000),
        baseline_rows=args.baseline_rows, repeat=pick(args, "repeat", 3, 1),
        seed=args.seed, show_progress=not args.no_progress)


def _format_merge(results: Results) -> str:
    from spark_stream_sched.bench import merge

    return merge.format_results(results)


# -- window -----------------------------------------------------------------------------------

def _add_window_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--inputs", type=_int_list, default=None,
                        help="number of input streams (default 8)")
    parser.add_argument("--queries", default=None,
                        help="comma-separated query names, e.g. k-OS,K-OI (default: all)")


def _run_window(args: argparse.Namespace) -> Results:
    from spark_stream_sched.bench import window

    if args.inputs is not None and len(args.inputs) != 1:
        raise ConfigError("bench window takes one --inputs value, e.g. --inputs 8")
    queries = [q.strip() for q in args.queries.split(",")] if args.queries else None
    return window.run(
        queries=queries, rows=pick(args, "rows", 1_000_000, 20_000),
        n_inputs=args.inputs[0] if args.inputs else 8,
        baseline_rows=args.baseline_rows or (5_000 if args.quick else 50_000),
        repeat=pick(args, "repeat", 3, 1), seed=args.seed,
        show_progress=not args.no_progress)


def _format_window(results: Results) -> str:
    from spark_stream_sched.bench import window

    return window.format_results(results)


# -- nexmark ----------------------------------------------------------------------------------

def _add_nexmark_args(parser: argparse.ArgumentParser) -> None:
    from spark_stream_sched.bench import nexmark

    parser.add_argument("--events", type=int, default=None,
                        help="events to generate (default 10,000,000; --quick 200,000)")
    parser.add_argument("--queries", default=None,
                        help=f"comma-separated queries (default all: {','.join(nexmark.QUERIES)})")
    parser.add_argument("--engines", default=None,
                        help=f"comma-separated engines (default {','.join(nexmark.ENGINES)})")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--workdir", default=None,
                        help="keep the events and outputs here (default: a temporary directory)")


def _names(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else default


def _run_nexmark(args: argparse.Namespace) -> Results:
    from spark_stream_sched.bench import nexmark

    events = args.events if args.events is not None else (200_000 if args.quick else 10_000_000)
    if events < 1:
        raise ConfigError("--events must be >= 1")
    return nexmark.run(events=events, queries=_names(args.queries, tuple(nexmark.QUERIES)),
                       engines=_names(args.engines, nexmark.ENGINES),
                       repeat=pick(args, "repeat", 3, 1), seed=args.seed, master=args.master,
                       workdir=args.workdir, show_progress=not args.no_progress)


def _format_nexmark(results: Results) -> str:
    from spark_stream_sched.bench import nexmark

    return nexmark.format_results(results)


# -- all --------------------------------------------------------------------------------------

#: What ``bench all`` runs, in order (``--quick`` makes each a smoke run).
ALL = ("merge", "window", "strategies", "spark", "keyed", "adaptation", "join", "join-memory")
#: Flags of ``bench all`` handed on to every benchmark it runs.
SHARED_FLAGS = ("repeat", "seed", "quick", "no_progress")


def _run_all(args: argparse.Namespace) -> Results:
    results: Results = []
    for name in ALL:
        bench = BENCHES[name]
        parser = argparse.ArgumentParser(prog=f"bench {name}")
        _add_common_args(parser)
        bench.add_args(parser)
        own = parser.parse_args([])  # each benchmark's own defaults
        for flag in SHARED_FLAGS:
            setattr(own, flag, getattr(args, flag))
        print(f"bench all: running {name} ...", file=sys.stderr, flush=True)
        results += [{**row, "bench": row.get("bench", name)} for row in bench.run(own)]
    return results


def _format_all(results: Results) -> str:
    sections = []
    for name in ALL:
        rows = [r for r in results if r["bench"] == name]
        sections += [f"== {name}: {BENCHES[name].help}", BENCHES[name].format(rows)]
    return "\n\n".join(sections)


BENCHES: dict[str, Bench] = {
    "merge": Bench("S-Merge vs heapq.merge for 2, 8, 20, 64 inputs",
                   _add_merge_args, _run_merge, _format_merge),
    "window": Bench("Gulisano et al. (2016), Table 2 queries: runtime vs the MQ baseline",
                    _add_window_args, _run_window, _format_window),
    "strategies": strategies_bench.register(Bench),
    "spark": Bench(*spark_cli.BENCH),
    # keyed: its run also appends bench.keyed_sessions.run_sessions_bench rows when present
    "keyed": keyed_bench.register(Bench),
    "adaptation": adaptation_bench.register(Bench),
    "join": join_bench.register(Bench),
    "join-memory": join_memory_bench.register(Bench),
    "nexmark": Bench("Nexmark q7, q11: runtime, Spark source, native Spark, per CPU second",
                     _add_nexmark_args, _run_nexmark, _format_nexmark),
    "all": Bench("every benchmark above, one after another (--quick: smoke runs)",
                 lambda parser: None, _run_all, _format_all),
}


def _add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=None, help="rows for the runtime")
    parser.add_argument("--baseline-rows", type=int, default=None,
                        help="rows for the (slow) baseline; rates stay per tuple")
    parser.add_argument("--repeat", type=int, default=None, help="runs per measurement (best)")
    parser.add_argument("--seed", type=int, default=0, help="data generator seed")
    parser.add_argument("--quick", action="store_true",
                        help="smoke-test sizes, one run; its figures are not measurements")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                        help="write results as JSON to FILE (stdout if no FILE; no table)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _execute(bench: Bench) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        for name in ("rows", "baseline_rows", "repeat"):
            if getattr(args, name) is not None and getattr(args, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1")
        from spark_stream_sched.bench.common import run_and_report

        run_and_report(lambda: bench.run(args), bench.format, args.json, args.quick)
        return 0

    return run


def register(subparsers: Any) -> None:
    """Add ``bench`` and its sub-commands to the CLI's subparsers."""
    parser = subparsers.add_parser("bench", help="benchmarks vs per-tuple baselines",
                                   description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="bench_command", metavar="BENCH",
                                parser_class=type(parser))
    for name, bench in BENCHES.items():
        child = sub.add_parser(name, help=bench.help, description=bench.help)
        _add_common_args(child)
        bench.add_args(child)
        child.set_defaults(func=_execute(bench))
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])
