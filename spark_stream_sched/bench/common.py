"""Shared benchmark helpers: timing, feeding inputs in packets, progress bars and tables."""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pyarrow as pa

from spark_stream_sched.errors import ConfigError

T = TypeVar("T")

#: Rows pushed per input per round when feeding a streaming operator.
DEFAULT_BATCH_ROWS = 65_536
#: Where the measured runs' plots live (in a checkout), which the docs show.
PLOT_DIR = "docs/img"
#: What a ``--quick`` run prints first and last: its sizes test that the code runs, no more.
QUICK_WARNING = ("quick run: sizes for a smoke test only; its figures (speed-ups, rates, "
                 "times) are not measurements")


def pick(args: Any, name: str, default: T, quick: T) -> T:
    """The flag ``name`` of ``args`` if given (not None), else its ``--quick`` or normal default."""
    value = getattr(args, name, None)
    if value is not None:
        return value  # type: ignore[no-any-return]
    return quick if getattr(args, "quick", False) else default


def plot_path(args: Any, name: str, default: str) -> str:
    """Where a bench writes its plots.

    The flag ``name`` if given, else ``default`` (under :data:`PLOT_DIR`), or for ``--quick``
    the same name in :func:`quick_plot_dir`, so a smoke run from a checkout never replaces the
    plots of a measured run.
    """
    quick = quick_plot_dir() / Path(default).relative_to(PLOT_DIR)
    return str(pick(args, name, default, str(quick)))


def quick_plot_dir() -> Path:
    """The directory of ``--quick`` runs' plots (in the system's temporary directory)."""
    return Path(tempfile.gettempdir()) / "spark-stream-sched-bench-quick"


def run_and_report(run: Callable[[], Sequence[dict[str, Any]]],
                   format_results: Callable[[Any], str], json_target: str | None,
                   quick: bool) -> None:
    """Run a bench; write its results as JSON to ``json_target`` and its table to stdout.

    The table is left out when the JSON goes to stdout (``json_target`` ``-``). With ``quick``,
    :data:`QUICK_WARNING` is printed before the run and after the report, where the table goes
    (to stderr beside JSON on stdout); nothing after a failed run. Every ``bench`` command
    reports through here (``commands/bench.py``, ``python -m
    spark_stream_sched.bench.spark_cli``).
    """
    def warn() -> None:
        if quick:
            print(QUICK_WARNING, file=sys.stderr if json_target == "-" else sys.stdout,
                  flush=True)

    warn()
    results = run()
    if json_target is not None:
        write_json(results, json_target)
    if json_target != "-":
        print(format_results(results))
    warn()


def best_of(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Run ``fn`` ``repeat`` times (at least once); return the shortest wall time and a result.

    The best of several runs is the least disturbed by other processes on a shared machine.
    """
    best, result = float("inf"), None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result  # type: ignore[return-value]


def rate(rows: int, seconds: float) -> float:
    """Return tuples per second (0.0 for an empty or unmeasurably short run)."""
    return rows / seconds if rows and seconds > 0 else 0.0


Packet = tuple[int, pa.Table | None]


def round_robin(inputs: Sequence[pa.Table], batch_rows: int) -> Iterator[Packet]:
    """Yield ``(input, packet)`` in rounds of ``batch_rows`` rows per input.

    After each round it yields ``(-1, None)`` (a point to poll), and once an input is exhausted
    ``(input, None)`` (a point to finish it). Every input is finished exactly once.
    """
    finished = [False] * len(inputs)
    lo = 0
    while not all(finished):
        for i, table in enumerate(inputs):
            if finished[i]:
                continue
            if lo < table.num_rows:
                yield i, table.slice(lo, batch_rows)
            if lo + batch_rows >= table.num_rows:
                finished[i] = True
                yield i, None
        yield -1, None
        lo += batch_rows


def bench_extra(module: str, purpose: str = "the benchmarks") -> ModuleType:
    """Import ``module`` of the ``bench`` extra (tqdm, matplotlib) or say how to install it.

    ``purpose`` names what needs it in the message (e.g. ``"the report command"``).

    Raises
    ------
    ConfigError
        When the extra is not installed; the message gives the pip command.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise ConfigError(f"{module.split('.')[0]} is not installed but needed by {purpose}; "
                          f"it comes with the 'bench' extra: "
                          f"pip install 'spark_stream_sched[bench]'") from None


def progress(total: int, desc: str, enabled: bool) -> Any:
    """Return a tqdm bar on stderr; hidden when disabled or when stderr is not a terminal."""
    tqdm = bench_extra("tqdm").tqdm
    return tqdm(total=total, desc=desc, unit="case", file=sys.stderr,
                disable=None if enabled else True, leave=False)


def format_table(results: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Render ``results`` as an aligned text table of ``(key, header)`` columns."""
    cells = [[header for _, header in columns]]
    for result in results:
        cells.append([_cell(result.get(key)) for key, _ in columns])
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Format one table cell: rates with thousands separators, ratios with two decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_json(results: Sequence[dict[str, Any]], target: str) -> None:
    """Write ``results`` as JSON to the file ``target``, or to stdout when it is ``-``."""
    text = json.dumps(list(results), indent=2, sort_keys=True)
    if target == "-":
        print(text)
    else:
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


def feed_round_robin(target: Any, inputs: Sequence[pa.Table], batch_rows: int,
                     poll: Callable[[], pa.Table]) -> list[pa.Table]:
    """Push ``inputs`` into ``target`` in round-robin packets; return what ``poll`` returned.

    ``target`` has ``push(i, packet)`` and ``finish(i)``; ``poll`` runs after every round and
    once at the end.
    """
    out = []
    for i, packet in round_robin(inputs, batch_rows):
        if i < 0:
            out.append(poll())
        elif packet is None:
            target.finish(i)
        else:
            target.push(i, packet)
    out.append(poll())
    return out
