"""Dense stage 2: combine pane partials into windows on ``[pane, key]`` grids with NumPy.

The sparse path (:func:`.panes.expand_to_windows` + :func:`.panes.combine_windows`) repeats each
partial row once per window that contains its pane, ``W/S`` times. When a chunk of panes is
dense enough (most keys have a partial in most panes) it is much cheaper to lay the partials out
on a ``[pane, key]`` grid and fold each window's ``W/P`` grid rows with passes whose cost does
not depend on ``W/P`` (:class:`_Grid`): counts and integer sums are differences of two prefix
sums (exact in int64, which wraps as Arrow's sum does), ``min``/``max`` the van Herk / Gil &
Werman running extremes over blocks of ``W/P`` rows, and ``first``/``last`` the nearest flagged
row found by a running minimum (maximum) of row indices. Every result is a value of one partial
or an exact integer, so both paths give bit-identical results; the property tests run both.
Pane sums of floating columns are added with one prefix sum over the panes per part (two
float64 parts proved exact, or limbs) and rounded once per window, as on the sparse path.

Keys get *sorted* dense ids (:func:`.order_codes.dense_ids`: rank among the chunk's distinct
keys, nulls first), so emitting the non-empty cells in row-major ``(window, key)`` order is
already the output order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime import exact_split
from spark_stream_sched.runtime.aggregates import BY_ORDER, BoundAggregate
from spark_stream_sched.runtime.exact_partials import is_exact
from spark_stream_sched.runtime.order_codes import dense_ids
from spark_stream_sched.runtime.window.panes import PANE, WINDOW

#: Largest grid (panes x keys) one dense chunk may allocate per partial column.
MAX_CELLS = 1 << 22


def numeric(t: pa.DataType) -> bool:
    """True for types whose min/max the dense path folds with NumPy."""
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def supports(aggs: list[BoundAggregate]) -> bool:
    """The dense path handles every aggregate but min/max of non-numeric columns and ``*_by``.

    ``max_by``/``min_by`` need the earliest of the partials with the window's extreme order,
    which no running-extreme pass here tracks; their windows are combined on the sparse path.
    """
    return all((a.spec.func not in ("min", "max") or numeric(a.output_type))
               and a.spec.func not in BY_ORDER for a in aggs)


class _Grid:
    """Windows ``0 .. n_windows-1`` of a ``[pane, key]`` grid, folded in passes per cell.

    Window ``w`` is the ``width`` grid rows from ``w * stride``. Each fold visits every cell a
    constant number of times, whatever the width (a prefix sum, one pass each way, or a
    running index).
    """

    def __init__(self, n_windows: int, stride: int, width: int) -> None:
        self.starts = np.arange(n_windows, dtype=np.int64) * stride
        self.width = width

    def totals(self, grid: np.ndarray) -> np.ndarray:
        """The sum of each window's rows per key (int64 wraps modulo 2**64, as Arrow's sum).

        A window is the difference of two prefixes; wrapping cancels in the difference.
        """
        prefix = np.zeros((grid.shape[0] + 1, grid.shape[1]), np.int64)
        np.cumsum(grid, axis=0, out=prefix[1:])
        out: np.ndarray = prefix[self.starts + self.width] - prefix[self.starts]
        return out

    def extremes(self, values: np.ndarray, func: str) -> np.ndarray:
        """``min`` or ``max`` of each window's rows per key (van Herk / Gil & Werman).

        Cut into blocks of ``width`` rows, a window is the tail of one block and the head of
        the next: the minimum of a running minimum backwards and one forwards. Empty cells
        must hold the operation's identity (their window's ``has`` decides validity).
        """
        op = np.minimum if func == "min" else np.maximum
        n, keys = values.shape
        blocks = -(-n // self.width)
        padded = np.full((blocks * self.width, keys), _identity(values.dtype, func), values.dtype)
        padded[:n] = values
        shaped = padded.reshape(blocks, self.width, keys)
        forward = op.accumulate(shaped, axis=1).reshape(-1, keys)
        backward = op.accumulate(shaped[:, ::-1], axis=1)[:, ::-1].reshape(-1, keys)
        out: np.ndarray = op(backward[self.starts], forward[self.starts + self.width - 1])
        return out

    def chosen(self, flags: np.ndarray, rows: np.ndarray, first: bool) -> np.ndarray:
        """Per window and key, ``rows`` at the first (or last) flagged grid row; -1 if none."""
        n = flags.shape[0]
        index = np.arange(n, dtype=np.int64)[:, None]
        if first:
            nearest = np.minimum.accumulate(np.where(flags, index, n)[::-1], axis=0)[::-1]
            at = nearest[self.starts]
            found = at < (self.starts + self.width)[:, None]
        else:
            nearest = np.maximum.accumulate(np.where(flags, index, -1), axis=0)
            at = nearest[self.starts + self.width - 1]
            found = at >= self.starts[:, None]
        picked = np.take_along_axis(rows, np.clip(at, 0, n - 1), axis=0)
        return np.where(found, picked, -1)


def _identity(dtype: np.dtype, func: str) -> object:
    """The identity of ``min`` (the largest value) or ``max`` (the smallest) for ``dtype``."""
    if np.issubdtype(dtype, np.floating):
        return np.inf if func == "min" else -np.inf
    info = np.iinfo(dtype)
    return info.max if func == "min" else info.min


def _fold(panes: pa.Table, lp: np.ndarray, kid: np.ndarray, shape: tuple[int, int],
          present: np.ndarray, rows: np.ndarray, agg: BoundAggregate, i: int,
          grid: _Grid) -> dict[str, np.ndarray]:
    """Fold one aggregate's partials over every window (its grids live only in this call)."""
    func = agg.spec.func
    out: dict[str, np.ndarray] = {}
    if func in ("count", "count_where", "avg"):
        out["n"] = grid.totals(_scatter(panes.column(f"a{i}_n"), lp, kid, shape, 0)[0])
    if func in ("sum", "avg", "min", "max"):
        name = f"a{i}_sum" if func in ("sum", "avg") else f"a{i}_v"
        fill = 0 if func in ("sum", "avg") else _identity(_numpy_type(panes, name), func)
        values, valid = _scatter(panes.column(name), lp, kid, shape, fill)
        out["has"] = grid.totals(valid.astype(np.int64)) > 0
        # Integer sums only (floats are exact partials): int64, wrapping as Arrow does.
        out["v"] = grid.totals(values) if func in ("sum", "avg") else grid.extremes(values, func)
    if func in ("first", "last", "first_where", "last_where"):
        flags = present if func in ("first", "last") else _scatter(
            panes.column(f"a{i}_found"), lp, kid, shape, False)[0]
        out["row"] = grid.chosen(flags, rows, func.startswith("first"))
    return out


def _numpy_type(panes: pa.Table, name: str) -> np.dtype:
    kind: np.dtype = np.dtype(panes.column(name).type.to_pandas_dtype())
    return kind


def _scatter(column: pa.ChunkedArray, lp: np.ndarray, kid: np.ndarray, shape: tuple[int, int],
             fill: object) -> tuple[np.ndarray, np.ndarray]:
    """Scatter a partial column onto a ``[pane, key]`` grid of ``fill``; also its validity."""
    values = column.fill_null(fill).to_numpy(zero_copy_only=False)
    grid = np.full(shape, fill, values.dtype)
    grid[lp, kid] = values
    valid = np.zeros(shape, bool)
    valid[lp, kid] = column.is_valid().to_numpy(zero_copy_only=False)
    return grid, valid


def combine_dense(panes: pa.Table, p_first: int, k_lo: int, n_windows: int, slide_panes: int,
                  width: int, keys: list[str], aggs: list[BoundAggregate]) -> pa.Table:
    """Combine the partials of windows ``k_lo .. k_lo+n_windows-1`` (panes from ``p_first``).

    ``panes`` holds exactly the partial rows of panes ``p_first .. p_first + n_panes - 1``.
    Returns a table with ``__k``, the key columns and one column per alias, in output order.
    Memory: a few ``n_panes x n_keys`` grids at a time (one aggregate's), whatever ``width``.
    """
    n_panes = (n_windows - 1) * slide_panes + width
    kid, distinct = dense_ids(panes, keys)
    n_keys = max(1, distinct.num_rows)
    lp = panes.column(PANE).to_numpy() - p_first
    shape = (n_panes, n_keys)
    present = np.zeros(shape, bool)
    present[lp, kid] = True
    rows = np.full(shape, -1, np.int64)
    rows[lp, kid] = np.arange(len(lp))
    grid = _Grid(n_windows, slide_panes, width)
    cells = np.nonzero(grid.totals(present.astype(np.int64)))
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        WINDOW: pa.array((cells[0] + k_lo).astype(np.int64))}
    for key in keys:
        out[key] = distinct.column(key).take(pa.array(cells[1]))
    windows = _Windows(lp, kid, shape, cells[0] * slide_panes, cells[1], width)
    for i, agg in enumerate(aggs):
        if is_exact(agg):
            out[agg.spec.alias] = _exact_column(agg, i, panes, windows)
            continue
        folded = _fold(panes, lp, kid, shape, present, rows, agg, i, grid)
        out[agg.spec.alias] = _result_column(agg, i, folded, cells, panes)
    return pa.table(out)


class _Windows:
    """Partial rows at ``(lp, kid)`` of a ``[pane, key]`` grid, and the output cells' windows.

    Output cell ``c`` is key ``key[c]`` over panes ``start[c] .. start[c] + width - 1``. The
    flat grid positions are computed once and the grid buffer is reused for every limb.
    """

    def __init__(self, lp: np.ndarray, kid: np.ndarray, shape: tuple[int, int],
                 start: np.ndarray, key: np.ndarray, width: int) -> None:
        n_keys = shape[1]
        self.rows = (lp + 1) * n_keys + kid  # row 0 of the grid: the empty prefix
        self.first = start * n_keys + key
        self.last = (start + width) * n_keys + key
        self.shape = (shape[0] + 1, n_keys)
        self.panes = shape[0]
        self._grids: dict[np.dtype, np.ndarray] = {}

    def total(self, per_row: np.ndarray) -> np.ndarray:
        """Sum of an int64 (or float64) value per partial row over each output cell's window.

        One cumulative sum over the panes; a window is the difference of two prefixes (exact
        for int64: wrapping cancels in the difference; float64 only where the caller proved
        every prefix exact, as :func:`.exact_split.window_sums` does).
        """
        grid = self._grids.get(per_row.dtype)
        if grid is None:
            grid = self._grids[per_row.dtype] = np.zeros(self.shape, per_row.dtype)
        else:
            grid.fill(0)
        flat = grid.reshape(-1)
        flat[self.rows] = per_row
        np.cumsum(grid, axis=0, out=grid)
        out: np.ndarray = flat[self.last] - flat[self.first]
        return out


def _exact_column(agg: BoundAggregate, i: int, panes: pa.Table, windows: _Windows) -> pa.Array:
    """A floating ``sum``/``avg`` per output cell: its panes' exact sums, rounded once."""
    partial = panes.column(f"a{i}_sum")
    total = exact_split.window_sums(partial, windows.total, windows.panes)
    if agg.spec.func == "sum":
        if not partial.null_count:  # every output cell has a partial of its own
            return pa.array(total)
        seen = windows.total(partial.is_valid().to_numpy(zero_copy_only=False).astype(np.int64))
        return pa.array(total, mask=seen == 0)
    n = windows.total(panes.column(f"a{i}_n").fill_null(0).to_numpy(zero_copy_only=False))
    with np.errstate(divide="ignore", invalid="ignore"):
        return pa.array(total / n, mask=n == 0)


def _result_column(agg: BoundAggregate, i: int, folded: dict[str, np.ndarray],
                   cells: tuple[np.ndarray, ...], panes: pa.Table) -> pa.Array:
    func = agg.spec.func
    if func in ("count", "count_where"):
        return pa.array(folded["n"][cells])
    if func == "avg":
        n = folded["n"][cells]
        total = folded["v"][cells].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = total / n
        return pa.array(mean, mask=n == 0)
    if func in ("sum", "min", "max"):
        return pa.array(folded["v"][cells], mask=~folded["has"][cells]).cast(agg.output_type)
    rows = folded["row"][cells]
    index = pa.array(rows, mask=rows < 0)
    return panes.column(f"a{i}_v").take(index)
