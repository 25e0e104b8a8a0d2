"""The ``spark-stream-sched`` command.

Each sub-command lives in its own module under :mod:`spark_stream_sched.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning an exit code. Errors derived from :class:`SparkStreamSchedError` (and
argparse usage errors) are printed as one line on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from spark_stream_sched import __version__
from spark_stream_sched.errors import SparkStreamSchedError

#: Sub-command modules, in the order ``--help`` lists them. A module that is missing is skipped
#: so that a partial install still runs the commands it has.
COMMAND_MODULES = ("demo", "run", "aggregate", "report", "simulate", "bench", "nexmark")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:
        """Help text without the reST literal markup of the docstrings it quotes."""
        return super().format_help().replace("``", "")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every available sub-command registered."""
    parser = _Parser(prog="spark-stream-sched", description=(
        "Deterministic, ordered stream processing for Apache Spark: the demo, jobs on an "
        "embedded Spark, ordered aggregation of files without Spark, the scheduling "
        "simulator and the benchmarks."))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"spark_stream_sched.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"spark_stream_sched.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    from spark_stream_sched.runtime.aggregates import check_aggregate_count

    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # before argparse, whose time grows with the square of the number of flags
        check_aggregate_count(sum(a == "--agg" or a.startswith("--agg=") for a in argv))
    except SparkStreamSchedError as exc:
        print(f"spark-stream-sched: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except SparkStreamSchedError as exc:
        print(f"spark-stream-sched {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
