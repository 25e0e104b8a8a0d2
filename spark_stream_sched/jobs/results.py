"""Reading a job's inputs and outputs back, and printing them for a human.

:func:`read_output` honours Spark's file-sink log (``_spark_metadata``): only files a committed
batch listed are read, so a crashed batch's partial files never show up.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

WINDOW_COLUMNS = ("window_start", "window_end", "session_start", "session_end")



@dataclass(frozen=True)
class JobResult:
    """What a job did: engine, rows read and written, micro-batches, wall time, results.

    ``join``: what the query's join stages did over the run (``join_*`` figures summed over its
    batches: clean-up results and seconds, bytes pushed to disk), None without a join stage or
    when the engine does not report them (``sink``).
    """

    engine: str
    n_inputs: int
    rows_in: int
    rows_out: int
    batches: int
    seconds: float
    output: str
    results: pa.Table
    startup_seconds: float = 0.0
    join: dict[str, float] | None = None

    @property
    def rows_per_second(self) -> float:
        """Input rows per second of wall time (0 for an empty or instant run)."""
        return self.rows_in / self.seconds if self.seconds > 0 else 0.0


def count_input_rows(dirs: Sequence[Path], fmt: str) -> int:
    """Rows in all input files (Parquet footers; CSV/JSON-lines files are parsed)."""
    from spark_stream_sched.inputs import count_rows, list_files

    return sum(count_rows(f, fmt) for d in dirs for f in list_files(str(d)))


def _spark_log_files(output: Path) -> list[Path]:
    """Files committed by Spark's Parquet file sink, from ``_spark_metadata``."""
    files: dict[str, bool] = {}
    entries = sorted(output.joinpath("_spark_metadata").iterdir(),
                     key=lambda p: int(p.name.split(".")[0]) if p.name[0].isdigit() else -1)
    for entry in entries:
        if not entry.name[0].isdigit():
            continue
        for line in entry.read_text().splitlines()[1:]:
            record = json.loads(line)
            path = unquote(urlparse(record["path"]).path)
            files[path] = record.get("action", "add") == "add"
    return [Path(p) for p, present in files.items() if present]


def output_files(output: str | Path) -> list[Path]:
    """Return the committed Parquet files of a job's output directory, in name order."""
    root = Path(output)
    if not root.is_dir():
        return []
    if (root / "_spark_metadata").is_dir():
        return sorted(_spark_log_files(root))
    return sorted(p for p in root.glob("*.parquet") if not p.name.startswith((".", "_")))


def sort_results(table: pa.Table, key_columns: Sequence[str], ts_column: str = "ts"
                 ) -> pa.Table:
    """Order result rows by ``(window_end, window_start, keys)`` (README, "Semantics").

    Sessions: ``(session_end, session_start, keys)``; rows of a keyed pipeline:
    ``(ts, keys)`` (the total order's ``input, seq`` are not part of the output).
    """
    if table.num_rows == 0:
        return table
    bounds = next((b for b in ("window", "session") if f"{b}_end" in table.column_names), None)
    keys = ([f"{bounds}_end", f"{bounds}_start", *key_columns] if bounds else
            [ts_column, *key_columns])
    return table.take(pc.sort_indices(table, [(k, "ascending", "at_start") for k in keys]))


def read_output(output: str | Path, key_columns: Sequence[str], ts_column: str = "ts"
                ) -> pa.Table:
    """All committed result rows of a job, in the output order."""
    files = output_files(output)
    if not files:
        return pa.table({})
    tables = [pq.read_table(f) for f in files]
    table = pa.concat_tables(tables, promote_options="permissive")
    return sort_results(table, key_columns, ts_column)


def _cell(value: object, name: str) -> str:
    if value is None:
        return "null"
    if name in WINDOW_COLUMNS and isinstance(value, int):
        value = dt.datetime.fromtimestamp(value / 1000, tz=dt.timezone.utc)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def format_rows(table: pa.Table, limit: int) -> str:
    """Render the first ``limit`` rows as an aligned text table (windows as UTC times)."""
    names = table.column_names
    rows = [[_cell(v, n) for n, v in row.items()] for row in table.slice(0, limit).to_pylist()]
    cells = [names, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(names))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if table.num_rows > limit:
        lines.append(f"... {table.num_rows - limit:,} more rows")
    return "\n".join(lines)


def format_summary(result: JobResult) -> str:
    """One readable block: engine, inputs, rows in/out, batches, time, throughput."""
    idle = result.batches == 0 and result.engine != "runtime"
    rate = "nothing new to process" if idle else f"{result.rows_per_second:,.0f} rows/s"
    batches = str(result.batches)
    if idle:
        batches += (" (the checkpoint had consumed every input already; the rows below are "
                    "from earlier runs — delete the checkpoint and output to run again)")
    return "\n".join([
        f"engine        {result.engine}",
        f"inputs        {result.n_inputs}",
        f"rows in       {result.rows_in:,}",
        f"rows out      {result.rows_out:,}",
        f"batches       {batches}",
        f"time          {result.seconds:.1f} s ({rate})"
        + (f", plus {result.startup_seconds:.1f} s to start Spark"
           if result.startup_seconds else ""),
        *([format_join(result.join)] if result.join is not None else []),
        f"output        {result.output}",
    ])


def format_join(figures: dict[str, float]) -> str:
    """The summary's ``join`` line: clean-up results and seconds, bytes pushed to disk."""
    pushed = int(figures.get("join_pushed_bytes", 0))
    held = int(figures.get("join_held_pushed_bytes", 0))
    return (f"join          {int(figures.get('join_cleanup_results', 0)):,} clean-up results "
            f"in {figures.get('join_cleanup_seconds', 0.0):.2f} s; {pushed + held:,} B pushed "
            f"to disk in {int(figures.get('join_pushes', 0)):,} pushes"
            + (f" ({held:,} B of held results)" if held else ""))


def join_totals(batches: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The ``join_*`` figures of ``batches`` (the source's per-batch metrics) added up."""
    total: dict[str, float] = {}
    for batch in batches:
        for key, value in batch.items():
            if key.startswith("join_") and isinstance(value, int | float):
                total[key] = total.get(key, 0) + value
    return total


def middle_window(table: pa.Table) -> pa.Table:
    """Rows of the window in the middle of the results (the first windows are partial).

    Results without windows (sessions, rows of a pipeline): the rows from the middle on.
    """
    if table.num_rows == 0:
        return table
    if "window_end" not in table.column_names:
        return table.slice(table.num_rows // 2)
    end = table.column("window_end")[table.num_rows // 2]
    return table.filter(pc.equal(table.column("window_end"), end))


def print_report(result: JobResult, show: int) -> None:
    """Print rows of one window from the middle of the run, and the summary, on stdout."""
    if result.results.num_rows == 0:
        print("(no result rows)")
    else:
        window = middle_window(result.results)
        what = ("keys in one window" if "window_end" in window.column_names else
                "rows from the middle on")
        print(f"\n{window.num_rows:,} {what} from the middle of the run "
              f"(of {result.results.num_rows:,} result rows):")
        print(format_rows(window, show))
    print()
    print(format_summary(result))
