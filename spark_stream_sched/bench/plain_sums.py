"""Plain float64 sums, for the window benchmark only: what exactly rounded sums cost.

The runtime's floating ``sum``/``avg`` follow one rule (``docs/aggregates.md``): exactly rounded,
whatever the panes. To measure that rule's price in the same run, :func:`plain_float_sums`
swaps the pane sums of :mod:`~spark_stream_sched.runtime.exact_split` for the float sums the
runtime had before the rule: one float64 ``np.bincount`` per pane, windows added in float64
(their bits depend on the panes, which is why the runtime does not do this). The pane-sum
columns keep their type, so the rest of the runtime runs unchanged. Never used outside
``bench window``'s ``*-plain`` queries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime import exact_split
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE
from spark_stream_sched.runtime.exact_split import PANE_SUM_TYPE


def _pane_sums(values: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
               pick: np.ndarray | None = None,
               count: np.ndarray | None = None) -> pa.StructArray:
    """Float64 sums of the non-null ``values`` per group, in pane-sum columns (``lo = 0``)."""
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    numbers = values.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
    seen = np.bincount(group[valid], minlength=groups) > 0
    total = np.bincount(group, weights=numbers, minlength=groups).astype(np.float64)
    if pick is not None:
        total, seen = total[pick], seen[pick]
    n = len(total)
    zeros, grid = pa.array(np.zeros(n)), pa.array(np.zeros(n, np.int16))
    columns = [pa.array(total), zeros, grid, grid, pa.nulls(n, PARTIAL_TYPE)]
    return pa.StructArray.from_arrays(columns, fields=list(PANE_SUM_TYPE), mask=pa.array(~seen))


def _hi(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return np.concatenate([np.nan_to_num(c.field(0).to_numpy(zero_copy_only=False))
                           for c in chunks] or [np.zeros(0)])


def _window_sums(column: pa.ChunkedArray | pa.Array, total: Callable[[np.ndarray], np.ndarray],
                 terms: int) -> np.ndarray:
    """Windows added in float64 (a prefix sum over the panes)."""
    return total(_hi(column))


def _totals(column: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
            rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pane sums added per group in float64."""
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    hi = _hi(column)
    if rows is not None:
        hi, valid = hi[rows], valid[rows]
    return (np.bincount(group, weights=hi, minlength=groups).astype(np.float64),
            np.bincount(group[valid], minlength=groups) > 0)


@contextmanager
def plain_float_sums() -> Iterator[None]:
    """Run the block with plain float64 window sums instead of the exact ones."""
    saved = exact_split.pane_sums, exact_split.window_sums, exact_split.totals
    exact_split.pane_sums, exact_split.window_sums, exact_split.totals = (
        _pane_sums, _window_sums, _totals)
    try:
        yield
    finally:
        exact_split.pane_sums, exact_split.window_sums, exact_split.totals = saved
