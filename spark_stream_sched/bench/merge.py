"""S-Merge benchmark: the runtime's vectorised merge vs a ``heapq.merge`` k-way merge.

For each number of inputs (2, 8, 20, 64 by default) both merge the same smart-grid streams
(one per data concentrator) in the same run:

* **S-Merge** (:class:`~spark_stream_sched.runtime.merge.SMerge`) is fed as a stream: every
  input pushes ``batch_rows`` rows per round and ready tuples are popped after each round.
* **heapq.merge** (:func:`~spark_stream_sched.testing.baselines.heapq_merge`) gets each input
  whole (which favours it: no readiness tracking) and merges per-row Python tuples.

Both produce every row with ``__input``/``__seq`` in the total order; the bench checks the
orders are identical. The baseline may run on fewer rows (``baseline_rows``); rates are per tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.bench.common import (
    DEFAULT_BATCH_ROWS,
    best_of,
    feed_round_robin,
    format_table,
    progress,
    rate,
)
from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.baselines import heapq_merge

DEFAULT_INPUT_COUNTS = (2, 8, 20, 64)


def smerge_all(inputs: Sequence[pa.Table], batch_rows: int = DEFAULT_BATCH_ROWS) -> pa.Table:
    """Merge ``inputs`` with S-Merge fed round-robin in packets; return all released rows."""
    merge = SMerge(len(inputs))
    released = feed_round_robin(merge, inputs, batch_rows, merge.pop_ready)
    return pa.concat_tables([t for t in released if t.num_columns])


def _same_order(a: pa.Table, b: pa.Table) -> bool:
    """Return True when both tables list the same ``(input, seq)`` identities in order."""
    columns = (INPUT_COL, SEQ_COL)
    return a.num_rows == b.num_rows and all(
        np.array_equal(a.column(c).to_numpy(), b.column(c).to_numpy()) for c in columns)


def bench_case(n_inputs: int, rows: int, baseline_rows: int, repeat: int, batch_rows: int,
               seed: int) -> dict[str, Any]:
    """Measure S-Merge and heapq.merge for one input count; return the result dict."""
    inputs = smart_grid_streams(n_inputs, rows=rows, seed=seed)
    small = inputs if baseline_rows >= rows else smart_grid_streams(
        n_inputs, rows=baseline_rows, seed=seed)
    ours_s, _ = best_of(repeat, lambda: smerge_all(inputs, batch_rows))
    base_s, expected = best_of(repeat, lambda: heapq_merge(small))
    ours_rate, base_rate = rate(rows, ours_s), rate(expected.num_rows, base_s)
    return {
        "bench": "merge", "case": f"{n_inputs} inputs", "inputs": n_inputs,
        "rows": rows, "seconds": ours_s, "rows_per_s": ours_rate,
        "baseline": "heapq.merge", "baseline_rows": expected.num_rows,
        "baseline_seconds": base_s, "baseline_rows_per_s": base_rate,
        "ratio": ours_rate / base_rate if base_rate else None,
        "same_order": _same_order(smerge_all(small, batch_rows), expected),
        "repeat": repeat, "batch_rows": batch_rows, "seed": seed,
    }


def run(input_counts: Sequence[int] = DEFAULT_INPUT_COUNTS, rows: int = 2_000_000,
        baseline_rows: int | None = None, repeat: int = 3, batch_rows: int = DEFAULT_BATCH_ROWS,
        seed: int = 0, show_progress: bool = True) -> list[dict[str, Any]]:
    """Run the merge benchmark for each input count; return one result dict per count.

    Parameters
    ----------
    input_counts : sequence of int
        Numbers of input streams to merge.
    rows : int
        Total rows over all inputs for S-Merge.
    baseline_rows : int, optional
        Rows for heapq.merge (default: ``rows``).
    repeat : int
        Runs per measurement; the best (shortest) is reported.
    batch_rows : int
        Rows per input per push when feeding S-Merge.
    seed : int
        Data generator seed.
    show_progress : bool
        Show a tqdm bar on stderr (only on a terminal).
    """
    baseline_rows = rows if baseline_rows is None else min(baseline_rows, rows)
    results = []
    with progress(len(input_counts), "bench merge", show_progress) as bar:
        for n in input_counts:
            results.append(bench_case(n, rows, baseline_rows, repeat, batch_rows, seed))
            bar.update()
    return results


COLUMNS = (
    ("case", "inputs"), ("rows", "rows"), ("rows_per_s", "S-Merge t/s"),
    ("baseline_rows", "heapq rows"), ("baseline_rows_per_s", "heapq.merge t/s"),
    ("ratio", "speed-up"), ("same_order", "same order"),
)


def format_results(results: Sequence[dict[str, Any]]) -> str:
    """Render merge results as a table with a note on how they were measured."""
    note = ("S-Merge: streamed in packets, readiness-tracked; heapq.merge: whole inputs, per-row "
            "Python tuples. Rates in tuples/s, best of repeat runs")
    if any(r["baseline_rows"] != r["rows"] for r in results):
        note += "; heapq.merge measured on fewer rows (see 'heapq rows')"
    return format_table(results, COLUMNS) + "\n" + note + "."
