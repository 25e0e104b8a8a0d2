"""Vectorised two-stage aggregation: tuples -> pane partials -> window results.

Stage 1 (:func:`pane_partials`) folds the tuples of complete panes into one partial row per
``(pane, key)``; stage 2 (:func:`combine_windows`) expands each partial row to the windows that
contain its pane and folds the partials of each ``(window, key)``. Both stages use Arrow's hash
aggregation with ``use_threads=False``, so results depend only on the tuples (never on batch
boundaries). Order-sensitive aggregates use the *position trick*: the min/max row position
(optionally masked by a predicate) selects the row whose value is taken, so ``first`` of a null
value is still that null (Spark's ``first``); ``max_by``/``min_by`` take the row
:func:`.by_order.chosen_positions` picks, in both stages. Floating sums are pane sums
(:mod:`~spark_stream_sched.runtime.exact_split`), merged and rounded once per window, so a
window's sum is exactly rounded whatever its panes were; each group's rows are found with
Arrow's ``list`` aggregation of row positions.

Partial columns per aggregate ``i``: ``a{i}_n`` counts, ``a{i}_sum`` sums (int64, or a pane
sum for a floating column), ``a{i}_v`` values, ``a{i}_found`` flags (for ``*_where``) and
``a{i}_o`` the chosen row's order (for ``max_by``/``min_by``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime import exact_partials as exact
from spark_stream_sched.runtime import exact_split
from spark_stream_sched.runtime.aggregates import BY_ORDER, BoundAggregate
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE
from spark_stream_sched.runtime.exact_split import PANE_SUM_TYPE
from spark_stream_sched.runtime.keys import canonical_keys
from spark_stream_sched.runtime.window.by_order import chosen_positions

PANE = "__pane"
WINDOW = "__k"
_POS = "__pos"
_SRC = "__src"
_SKIP = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
_COUNT0 = pc.ScalarAggregateOptions(skip_nulls=True, min_count=0)


def with_group_keys(rows: pa.Table, keys: list[str]) -> tuple[pa.Table, list[str]]:
    """``rows`` plus the columns panes group by (``__g0``, ...), and those columns' names.

    They are the key columns in canonical form (:func:`~..keys.canonical_keys`): ``-0.0`` and
    ``0.0`` are one key, emitted as ``0.0``, and every NaN is one key, emitted as the quiet NaN
    (Spark's grouping); aggregates still read the key columns' own values. Stage 1 grouped by
    them gives partials whose key columns (renamed back) stage 2 and the state keep as they are.
    """
    names = [f"__g{i}" for i in range(len(keys))]
    for name, column in zip(names, canonical_keys(rows.select(keys), keys).columns, strict=True):
        rows = rows.append_column(name, column)
    return rows, names


def _group_of_rows(grouped: pa.Table, rows: int) -> np.ndarray:
    """Group number (row of ``grouped``) of every input row, from the ``list`` of positions."""
    lists = grouped.column(f"{_POS}_list").combine_chunks()
    group = np.empty(rows, np.int64)
    group[lists.flatten().to_numpy()] = np.repeat(np.arange(len(lists)),
                                                  lists.value_lengths().to_numpy())
    return group


def needs_groups(aggs: list[BoundAggregate]) -> bool:
    """True when an aggregate reads each row's group (exact sums, ``max_by``/``min_by``)."""
    return any(exact.is_exact(a) or a.spec.func in BY_ORDER for a in aggs)


def _chosen(table: pa.Table, agg: BoundAggregate, i: int, value: str, order: str,
            group: np.ndarray | None, n_groups: int) -> dict[str, pa.Array | pa.ChunkedArray]:
    """``a{i}_v`` and ``a{i}_o`` of the row ``max_by``/``min_by`` chooses in each group."""
    assert group is not None
    pos = chosen_positions(table.column(order), group, n_groups, agg.spec.func == "max_by")
    return {f"a{i}_v": table.column(value).take(pos), f"a{i}_o": table.column(order).take(pos)}


def _masked_positions(positions: pa.Array, mask: np.ndarray) -> pa.Array:
    return pa.array(positions.to_numpy(), mask=~mask)


def _stage1_requests(
    aggs: list[BoundAggregate], rows: pa.Table
) -> tuple[pa.Table, list[tuple[str, str, pc.FunctionOptions | None]]]:
    """Add helper columns to ``rows`` and list the Arrow aggregations stage 1 needs."""
    n = rows.num_rows
    positions = pa.array(np.arange(n, dtype=np.int64))
    rows = rows.append_column(_POS, positions)
    requests: dict[tuple[str, str], pc.FunctionOptions | None] = {}
    for i, agg in enumerate(aggs):
        spec, func = agg.spec, agg.spec.func
        if func == "count":
            requests[(_POS if spec.column == "*" else str(spec.column), "count")] = None
        elif func in ("sum", "avg"):
            if exact.is_exact(agg):
                requests[(_POS, "list")] = None
            else:
                rows = rows.append_column(f"__s{i}", rows.column(spec.column).cast(pa.int64()))
                requests[(f"__s{i}", "sum")] = _SKIP
            if func == "avg":
                requests[(str(spec.column), "count")] = None
        elif func in ("min", "max"):
            requests[(str(spec.column), func)] = _SKIP
        elif func == "count_where":
            assert agg.predicate is not None
            hits = agg.predicate.evaluate(rows).astype(np.int64)
            rows = rows.append_column(f"__w{i}", pa.array(hits))
            requests[(f"__w{i}", "sum")] = _COUNT0
        elif func in ("first", "last"):
            requests[(_POS, "min" if func == "first" else "max")] = _SKIP
        elif func in BY_ORDER:
            requests[(_POS, "list")] = None
        else:  # first_where / last_where
            assert agg.predicate is not None
            mask = agg.predicate.evaluate(rows)
            rows = rows.append_column(f"__w{i}", _masked_positions(positions, mask))
            requests[(f"__w{i}", "min" if func == "first_where" else "max")] = _SKIP
    return rows, [(col, fn, opts) for (col, fn), opts in requests.items()]


def pane_partials(
    rows: pa.Table, pane: np.ndarray, keys: list[str], aggs: list[BoundAggregate]
) -> pa.Table:
    """Stage 1: one partial row per ``(pane, key)`` of ``rows`` (tuples in the total order).

    The result is sorted by pane (Arrow does not promise any group order, so it is sorted
    here; stage 2 relies on pane order for ``first``/``last``).
    """
    rows = rows.append_column(PANE, pa.array(pane))
    rows, requests = _stage1_requests(aggs, rows)
    grouped = rows.group_by([PANE, *keys], use_threads=False).aggregate(requests)
    group = _group_of_rows(grouped, rows.num_rows) if needs_groups(aggs) else None
    out = {PANE: grouped.column(PANE)}
    out.update({key: grouped.column(key) for key in keys})
    for i, agg in enumerate(aggs):
        spec, func = agg.spec, agg.spec.func
        if func == "count":
            out[f"a{i}_n"] = grouped.column(f"{_POS if spec.column == '*' else spec.column}_count")
        elif func in ("sum", "avg"):
            out[f"a{i}_sum"] = (exact_split.pane_sums(rows.column(spec.column), group,
                                                      grouped.num_rows)
                                if group is not None and exact.is_exact(agg) else
                                grouped.column(f"__s{i}_sum"))
            if func == "avg":
                out[f"a{i}_n"] = grouped.column(f"{spec.column}_count")
        elif func in ("min", "max"):
            out[f"a{i}_v"] = grouped.column(f"{spec.column}_{func}")
        elif func == "count_where":
            out[f"a{i}_n"] = grouped.column(f"__w{i}_sum")
        elif func in BY_ORDER:
            out.update(_chosen(rows, agg, i, str(spec.column), str(spec.order), group,
                               grouped.num_rows))
        else:
            pos_col = (f"{_POS}_{'min' if func == 'first' else 'max'}"
                       if func in ("first", "last") else
                       f"__w{i}_{'min' if func == 'first_where' else 'max'}")
            pos = grouped.column(pos_col)
            out[f"a{i}_v"] = rows.column(str(spec.column)).take(pos)
            if func.endswith("_where"):
                out[f"a{i}_found"] = pc.is_valid(pos)
    partials = pa.table(out)
    order = np.argsort(partials.column(PANE).to_numpy(), kind="stable")
    return partials.take(pa.array(order))


def expand_to_windows(panes: pa.Table, k_first: np.ndarray, k_last: np.ndarray) -> pa.Table:
    """Repeat each partial row once per window ``k`` in ``[k_first, k_last]`` (row-wise).

    Exact partials are not repeated: column ``__src`` gives each row's partial row in ``panes``
    (pass ``panes`` to :func:`combine_windows`).
    """
    counts = np.maximum(k_last - k_first + 1, 0)
    index = np.repeat(np.arange(panes.num_rows), counts)
    offsets = np.arange(index.size) - np.repeat(np.cumsum(counts) - counts, counts)
    k = np.repeat(k_first, counts) + offsets
    plain = [name for name in panes.column_names
             if panes.schema.field(name).type not in (PARTIAL_TYPE, PANE_SUM_TYPE)]
    expanded = panes.select(plain).take(pa.array(index))
    return expanded.append_column(WINDOW, pa.array(k.astype(np.int64))).append_column(
        _SRC, pa.array(index))


def _window_sum(grouped: pa.Table, table: pa.Table, group: np.ndarray | None,
                agg: BoundAggregate, i: int,
                partials: pa.Table | None) -> pa.Array | pa.ChunkedArray:
    """The ``sum`` or ``avg`` of each group: exact partials merged and rounded once, or int64."""
    if group is not None and exact.is_exact(agg):
        rows = table.column(_SRC).to_numpy() if partials is not None else None
        column = (table if partials is None else partials).column(f"a{i}_sum")
        total, seen = exact_split.totals(column, group, grouped.num_rows, rows)
        total_col: pa.Array | pa.ChunkedArray = pa.array(total, mask=~seen)
    else:
        total_col = grouped.column(f"a{i}_sum_sum")
    if agg.spec.func == "sum":
        return total_col.cast(agg.output_type)
    n = grouped.column(f"a{i}_n_sum")
    return pc.if_else(pc.equal(n, 0), pa.scalar(None, pa.float64()),
                      pc.divide(total_col.cast(pa.float64()), n.cast(pa.float64())))


def _stage2_requests(
    aggs: list[BoundAggregate], table: pa.Table
) -> tuple[pa.Table, list[tuple[str, str, pc.FunctionOptions | None]]]:
    """Add helper columns to ``table`` and list the Arrow aggregations stage 2 needs."""
    positions = table.column(_POS).combine_chunks()
    requests: list[tuple[str, str, pc.FunctionOptions | None]] = []
    for i, agg in enumerate(aggs):
        func = agg.spec.func
        if func in ("count", "count_where"):
            requests.append((f"a{i}_n", "sum", _COUNT0))
        elif func in ("sum", "avg"):
            if not exact.is_exact(agg):
                requests.append((f"a{i}_sum", "sum", _SKIP))
            if func == "avg":
                requests.append((f"a{i}_n", "sum", _COUNT0))
        elif func in ("min", "max"):
            requests.append((f"a{i}_v", func, _SKIP))
        elif func not in BY_ORDER:
            mask = (np.ones(table.num_rows, dtype=bool) if func in ("first", "last") else
                    table.column(f"a{i}_found").to_numpy().astype(bool))
            table = table.append_column(f"__p{i}", _masked_positions(positions, mask))
            requests.append((f"__p{i}", "min" if func.startswith("first") else "max", _SKIP))
    if needs_groups(aggs):
        requests.append((_POS, "list", None))
    return table, requests


def combine_windows(expanded: pa.Table, keys: list[str], aggs: list[BoundAggregate],
                    partials: pa.Table | None = None) -> pa.Table:
    """Stage 2: fold the partials of each ``(window, key)``; rows must be in pane order.

    ``partials``: the table :func:`expand_to_windows` expanded (its exact partials), or None
    when ``expanded`` holds its rows' partials itself (one window per partial row).
    """
    positions = pa.array(np.arange(expanded.num_rows, dtype=np.int64))
    table, requests = _stage2_requests(aggs, expanded.append_column(_POS, positions))
    grouped = table.group_by([WINDOW, *keys], use_threads=False).aggregate(requests)
    group = _group_of_rows(grouped, table.num_rows) if needs_groups(aggs) else None
    out = {WINDOW: grouped.column(WINDOW)}
    out.update({key: grouped.column(key) for key in keys})
    for i, agg in enumerate(aggs):
        func, alias = agg.spec.func, agg.spec.alias
        if func in ("count", "count_where"):
            out[alias] = grouped.column(f"a{i}_n_sum")
        elif func in ("sum", "avg"):
            out[alias] = _window_sum(grouped, table, group, agg, i, partials)
        elif func in ("min", "max"):
            out[alias] = grouped.column(f"a{i}_v_{func}")
        elif func in BY_ORDER:
            out[alias] = _chosen(table, agg, i, f"a{i}_v", f"a{i}_o", group,
                                 grouped.num_rows)[f"a{i}_v"]
        else:
            pos = grouped.column(f"__p{i}_{'min' if func.startswith('first') else 'max'}")
            out[alias] = table.column(f"a{i}_v").take(pos)
    return pa.table(out)
