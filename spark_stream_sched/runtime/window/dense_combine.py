"""Dense stage 2: combine pane partials into windows on ``[pane, key]`` grids with NumPy.

The sparse path (:func:`.panes.expand_to_windows` + :func:`.panes.combine_windows`) repeats each
partial row once per window that contains its pane, ``W/S`` times. When a chunk of panes is
dense enough (most keys have a partial in most panes) it is much cheaper to lay the partials out
on a ``[pane, key]`` grid and fold ``W/P`` strided slices of it, one per pane position inside a
window. The fold visits the panes of a window in pane order with the same operations as the
sparse path (``where``-guarded ``+``/``min``/``max``, first/last by position), so both paths give
bit-identical results; the property tests run both. Exact partials of floating sums are added
limb by limb with one prefix sum over the panes (a window is the difference of two prefixes,
exact in int64) and rounded once per window, as on the sparse path.

Keys get *sorted* dense ids (:func:`.order_codes.dense_ids`: rank among the chunk's distinct
keys, nulls first), so emitting the non-empty cells in row-major ``(window, key)`` order is
already the output order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime import exact_partials
from spark_stream_sched.runtime.aggregates import BoundAggregate
from spark_stream_sched.runtime.exact_partials import is_exact
from spark_stream_sched.runtime.order_codes import dense_ids
from spark_stream_sched.runtime.window.panes import PANE, WINDOW

#: Largest grid (panes x keys) one dense chunk may allocate per partial column.
MAX_CELLS = 1 << 22


def numeric(t: pa.DataType) -> bool:
    """True for types whose min/max the dense path folds with NumPy."""
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def supports(aggs: list[BoundAggregate]) -> bool:
    """The dense path handles every aggregate except min/max of non-numeric columns."""
    return all(a.spec.func not in ("min", "max") or numeric(a.output_type) for a in aggs)


def _fold(grids: dict[str, np.ndarray], present: np.ndarray, agg: BoundAggregate, i: int,
          n_windows: int, stride: int, width: int) -> dict[str, np.ndarray]:
    """Fold one aggregate's partial grids over the ``width`` panes of each window."""
    func = agg.spec.func
    shape = (n_windows, present.shape[1])
    out: dict[str, np.ndarray] = {}
    if func in ("count", "count_where"):
        total = np.zeros(shape, np.int64)
        for j in range(width):
            total += grids[f"a{i}_n"][j::stride][:n_windows]
        out["n"] = total
        return out
    if func in ("sum", "avg", "min", "max"):
        name = f"a{i}_sum" if func in ("sum", "avg") else f"a{i}_v"
        values, valid = grids[name], grids[name + "/valid"]
        acc = np.zeros(shape, values.dtype)
        has = np.zeros(shape, bool)
        for j in range(width):
            v, ok = values[j::stride][:n_windows], valid[j::stride][:n_windows]
            if func in ("sum", "avg"):
                # Integer sums only (floats are exact partials): int64, wrapping as Arrow does.
                acc = np.where(ok, acc + v, acc)
            else:
                op = np.minimum if func == "min" else np.maximum
                acc = np.where(ok, np.where(has, op(acc, v), v), acc)
            has |= ok
        out["v"], out["has"] = acc, has
        if func == "avg":
            n = np.zeros(shape, np.int64)
            for j in range(width):
                n += grids[f"a{i}_n"][j::stride][:n_windows]
            out["n"] = n
        return out
    # first / last / first_where / last_where: pick the partial row by pane position.
    flags = present if func in ("first", "last") else grids[f"a{i}_found"]
    rows = grids["__row"]
    chosen = np.full(shape, -1, np.int64)
    found = np.zeros(shape, bool)
    positions = range(width) if func.startswith("first") else range(width - 1, -1, -1)
    for j in positions:
        f, r = flags[j::stride][:n_windows], rows[j::stride][:n_windows]
        chosen = np.where(~found & f, r, chosen)
        found |= f
    out["row"] = chosen
    return out


def _scatter(column: pa.ChunkedArray, lp: np.ndarray, kid: np.ndarray, shape: tuple[int, int],
             fill: object) -> tuple[np.ndarray, np.ndarray]:
    """Scatter a partial column onto a ``[pane, key]`` grid; also return its validity grid."""
    values = column.fill_null(fill).to_numpy(zero_copy_only=False)
    grid = np.zeros(shape, values.dtype)
    grid[lp, kid] = values
    valid = np.zeros(shape, bool)
    valid[lp, kid] = column.is_valid().to_numpy(zero_copy_only=False)
    return grid, valid


def _grids(panes: pa.Table, lp: np.ndarray, kid: np.ndarray, n_panes: int, n_keys: int,
           aggs: list[BoundAggregate]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Lay out the partial columns the folds need on ``[pane, key]`` grids."""
    shape = (n_panes, n_keys)
    present = np.zeros(shape, bool)
    present[lp, kid] = True
    row = np.full(shape, -1, np.int64)
    row[lp, kid] = np.arange(len(lp))
    grids: dict[str, np.ndarray] = {"__row": row}
    for i, agg in enumerate(aggs):
        func = agg.spec.func
        names = {"count": ["n"], "count_where": ["n"], "sum": ["sum"], "avg": ["sum", "n"],
                 "min": ["v"], "max": ["v"], "first_where": ["found"],
                 "last_where": ["found"]}.get(func, []) if not is_exact(agg) else []
        for part in names:
            name = f"a{i}_{part}"
            fill: object = False if part == "found" else 0
            grids[name], grids[name + "/valid"] = _scatter(panes.column(name), lp, kid, shape,
                                                           fill)
    return grids, present


def combine_dense(panes: pa.Table, p_first: int, k_lo: int, n_windows: int, slide_panes: int,
                  width: int, keys: list[str], aggs: list[BoundAggregate]) -> pa.Table:
    """Combine the partials of windows ``k_lo .. k_lo+n_windows-1`` (panes from ``p_first``).

    ``panes`` holds exactly the partial rows of panes ``p_first .. p_first + n_panes - 1``.
    Returns a table with ``__k``, the key columns and one column per alias, in output order.
    """
    n_panes = (n_windows - 1) * slide_panes + width
    kid, distinct = dense_ids(panes, keys)
    n_keys = max(1, distinct.num_rows)
    lp = panes.column(PANE).to_numpy() - p_first
    grids, present = _grids(panes, lp, kid, n_panes, n_keys, aggs)
    any_row = np.zeros((n_windows, n_keys), bool)
    for j in range(width):
        any_row |= present[j::slide_panes][:n_windows]
    cells = np.nonzero(any_row)
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        WINDOW: pa.array((cells[0] + k_lo).astype(np.int64))}
    for key in keys:
        out[key] = distinct.column(key).take(pa.array(cells[1]))
    windows = _Windows(lp, kid, (n_panes, n_keys), cells[0] * slide_panes, cells[1], width)
    for i, agg in enumerate(aggs):
        if is_exact(agg):
            out[agg.spec.alias] = _exact_column(agg, i, panes, windows)
            continue
        folded = _fold(grids, present, agg, i, n_windows, slide_panes, width)
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
        self._grid: np.ndarray | None = None

    def total(self, per_row: np.ndarray) -> np.ndarray:
        """Sum of an int64 value per partial row over each output cell's window.

        One cumulative sum over the panes; a window is the difference of two prefixes (exact:
        int64 wrapping cancels in the difference).
        """
        if self._grid is None:
            self._grid = np.zeros(self.shape, np.int64)
        else:
            self._grid.fill(0)
        flat = self._grid.reshape(-1)
        flat[self.rows] = per_row
        np.cumsum(self._grid, axis=0, out=self._grid)
        out: np.ndarray = flat[self.last] - flat[self.first]
        return out


def _exact_column(agg: BoundAggregate, i: int, panes: pa.Table, windows: _Windows) -> pa.Array:
    """A floating ``sum``/``avg`` per output cell: its panes' exact partials, rounded once."""
    partial = panes.column(f"a{i}_sum")
    total = exact_partials.from_arrow(partial).summed(windows.total).to_double()
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
