"""Dense stage 1: fold tuples into pane partials with ``bincount`` / ``ufunc.at`` on a grid.

Same contract and results as :func:`.panes.pane_partials` (the Arrow hash-aggregation path): one
partial row per ``(pane, key)``, sorted by pane. Tuples of a chunk are mapped to a cell
``pane * n_keys + key_rank`` of a dense grid and folded with NumPy primitives that visit them in
input order: ``np.bincount`` (counts), ``np.add.at`` (exact int64 sums), pane sums of
floating sums (:func:`~spark_stream_sched.runtime.exact_split.pane_sums`), ``np.minimum.at`` /
``np.maximum.at`` (min, max, and the first or last *position*, which selects the value of
``first``/``last``), and :func:`.by_order.chosen_positions` for ``max_by``/``min_by``. This
avoids a hash table per tuple when the grid is small relative to the number of tuples (many
tuples per key and pane).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime import exact_split
from spark_stream_sched.runtime.aggregates import BY_ORDER, BoundAggregate
from spark_stream_sched.runtime.order_codes import dense_ids
from spark_stream_sched.runtime.window.by_order import chosen_positions
from spark_stream_sched.runtime.window.dense_combine import MAX_CELLS, numeric
from spark_stream_sched.runtime.window.panes import PANE


def fits(n_rows: int, n_panes: int, n_keys: int) -> bool:
    """True when a ``n_panes x n_keys`` grid is cheap compared with ``n_rows`` tuples.

    The grid spans every pane between the first and the last tuple, so this check is what
    keeps the dense path's memory bounded by the rows (at most ``4 * n_rows`` cells, or 4096)
    rather than by the event-time span: a chunk with one tuple far from the others goes to
    the sparse (Arrow hash) path.
    """
    return n_panes * n_keys <= max(4 * n_rows, 1 << 12)


def supports(aggs: list[BoundAggregate]) -> bool:
    """Dense stage 1 handles all aggregates but min/max of non-numeric columns."""
    return all(a.spec.func not in ("min", "max") or numeric(a.output_type) for a in aggs)


def _valid(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _extreme_position(cell: np.ndarray, size: int, mask: np.ndarray | None,
                      first: bool) -> np.ndarray:
    """Per cell, the first (min) or last (max) row position where ``mask`` holds; -1 if none."""
    positions = np.arange(len(cell), dtype=np.int64)
    if mask is not None:
        cell, positions = cell[mask], positions[mask]
    if first:
        out = np.full(size, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(out, cell, positions)
        out[out == np.iinfo(np.int64).max] = -1
    else:
        out = np.full(size, -1, np.int64)
        np.maximum.at(out, cell, positions)
    return out


def _sum(column: pa.ChunkedArray, cell: np.ndarray, size: int,
         cells: np.ndarray, counts: np.ndarray) -> pa.Array:
    """Partial sums of the non-empty ``cells``: pane sums of floats, int64 sums of integers."""
    if not pa.types.is_integer(column.type):
        return exact_split.pane_sums(column, cell, size, cells, counts)
    ok = _valid(column)
    values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    total = np.zeros(size, np.int64)
    np.add.at(total, cell[ok], values[ok])
    return pa.array(total[cells], mask=~(np.bincount(cell[ok], minlength=size) > 0)[cells])


def _extreme_value(column: pa.ChunkedArray, cell: np.ndarray, size: int,
                   func: str) -> tuple[np.ndarray, np.ndarray]:
    ok = _valid(column)
    values = column.fill_null(0).to_numpy(zero_copy_only=False)[ok]
    out = np.zeros(size, values.dtype)
    seen = np.bincount(cell[ok], minlength=size) > 0
    if np.issubdtype(values.dtype, np.floating):
        out[:] = np.inf if func == "min" else -np.inf
    else:
        info = np.iinfo(values.dtype)
        out[:] = info.max if func == "min" else info.min
    (np.minimum if func == "min" else np.maximum).at(out, cell[ok], values)
    return out, seen


def pane_partials_dense(rows: pa.Table, pane: np.ndarray, keys: list[str],
                        aggs: list[BoundAggregate], force: bool = False) -> pa.Table | None:
    """Stage 1 on a dense grid; None when the grid would be too large (use the Arrow path).

    ``force`` builds the grid whenever it has at most :data:`.dense.MAX_CELLS` cells, however
    sparse (tests and benchmarks); a larger grid still returns None.
    """
    kid, distinct = dense_ids(rows, keys)
    n_keys = max(1, distinct.num_rows)
    p0 = int(pane[0])
    n_panes = int(pane[-1]) - p0 + 1
    too_big = n_panes * n_keys > MAX_CELLS if force else not fits(rows.num_rows, n_panes, n_keys)
    if too_big:
        return None
    size = n_panes * n_keys
    cell = (pane - p0) * n_keys + kid
    counts = np.bincount(cell, minlength=size)
    cells = np.flatnonzero(counts)
    out: dict[str, pa.Array | pa.ChunkedArray] = {
        PANE: pa.array(cells // n_keys + p0)}
    for key in keys:
        out[key] = distinct.column(key).take(pa.array(cells % n_keys))
    for i, agg in enumerate(aggs):
        out.update(_partial(agg, i, rows, cell, size, counts, cells))
    return pa.table(out)


def _partial(agg: BoundAggregate, i: int, rows: pa.Table, cell: np.ndarray, size: int,
             counts: np.ndarray, cells: np.ndarray) -> dict[str, pa.Array]:
    spec, func = agg.spec, agg.spec.func
    column = rows.column(str(spec.column)) if spec.column not in (None, "*") else None
    if func == "count":
        n = counts if column is None else np.bincount(cell[_valid(column)], minlength=size)
        return {f"a{i}_n": pa.array(n[cells].astype(np.int64))}
    if func in ("sum", "avg"):
        assert column is not None
        out = {f"a{i}_sum": _sum(column, cell, size, cells, counts)}
        if func == "avg":
            out[f"a{i}_n"] = pa.array(np.bincount(cell[_valid(column)], minlength=size)[cells])
        return out
    if func in ("min", "max"):
        assert column is not None
        values, seen = _extreme_value(column, cell, size, func)
        return {f"a{i}_v": pa.array(values[cells], mask=~seen[cells]).cast(agg.output_type)}
    if func in BY_ORDER:
        order = rows.column(str(spec.order))
        assert column is not None
        chosen = chosen_positions(order, cell, size, func == "max_by").take(pa.array(cells))
        return {f"a{i}_v": column.take(chosen), f"a{i}_o": order.take(chosen)}
    mask = agg.predicate.evaluate(rows) if agg.predicate is not None else None
    if func == "count_where":
        assert mask is not None
        return {f"a{i}_n": pa.array(np.bincount(cell[mask], minlength=size)[cells])}
    assert column is not None
    position = _extreme_position(cell, size, mask, func.startswith("first"))[cells]
    index = pa.array(position, mask=position < 0)
    out = {f"a{i}_v": column.take(index)}
    if func.endswith("_where"):
        out[f"a{i}_found"] = pc.is_valid(index)
    return out
