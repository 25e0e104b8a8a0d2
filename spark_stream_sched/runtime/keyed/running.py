"""``running(<aggregate>, ...)``: per-key running aggregates appended to every tuple.

``running(sum(kwh) as total, count(*) as n, first(x) as f, max(v))`` appends one column per
aggregate holding its value over the key's tuples up to and including this one, in the total order
``(ts, input, seq)`` (a partitioned stateful operator, Prasaad et al. (2018), §2.1). Every aggregate
of
:mod:`~spark_stream_sched.runtime.aggregates` is supported, with Spark SQL's null rules:
``count(col)``, ``sum``, ``avg``, ``min``, ``max`` skip nulls (``sum``/``avg``/``min``/``max``
are null while the key has seen no non-null value); ``first``/``last`` take the value even when
it is null; a null predicate counts as false. A column is named by the aggregate's alias, else by
its canonical text (``max(v)``); with a single aggregate the stage alias
(``running(sum(x)) as total``) names it.

Exactness: a floating running sum is the exactly rounded sum of the key's values so far (the
rule of ``docs/aggregates.md``, whatever the batching), ``avg`` is that sum divided by the
count, integer sums wrap at 64 bits as Spark's ``long`` does, and ``min``/``max``/``first``/
``last`` return copies of input values (``min``/``max`` order NaN above every number, as Spark
does, and keep the earliest of equal values).

State per key, one typed Arrow column per piece: counts, the running sum (an exact partial,
:data:`~spark_stream_sched.runtime.exact_partials.PARTIAL_TYPE`, for a floating column) and
count of ``sum``/``avg``, the current value of ``min``/``max``, the value and order of the row
``max_by``/``min_by`` holds, the value and a found-flag of ``first``, ``first_where`` and
``last_where`` (``last`` needs none: it is the tuple's own value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ExpressionError
from spark_stream_sched.runtime import exact_partials
from spark_stream_sched.runtime.aggregates import BoundAggregate, bind, parse_aggregates
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE
from spark_stream_sched.runtime.exact_sum import running_sums
from spark_stream_sched.runtime.keyed.base import register
from spark_stream_sched.runtime.keyed.groups import (
    KeyGroups,
    RowOperator,
    column,
    key_fields,
    lookup,
    merge_state,
    take,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec

#: A kernel's result: the output column and, per state column, an array over the rows whose
#: entry at each key's last row is the state after it (the only entries kept).
Result = tuple[pa.Array, dict[str, pa.Array]]


class _Packet:
    """One update's rows with their key groups and the state rows of those keys."""

    def __init__(self, rows: pa.Table, keys: list[str], state: pa.Table) -> None:
        self.rows = rows
        self.groups = KeyGroups.of(rows, keys)
        self.slot = lookup(state, self.groups)  # per group, -1: new key
        self.state = state
        self.k = state.num_rows
        self.sizes = np.diff(self.groups.starts)

    def per_row(self, per_group: np.ndarray) -> np.ndarray:
        """Broadcast one value per group to the group's rows."""
        return np.asarray(per_group[self.groups.group])

    def carried(self, name: str, default: int | float | bool) -> np.ndarray:
        """State column ``name`` per group (``default`` for new keys or null state)."""
        values = np.asarray(self.state.column(name).fill_null(default).to_numpy(
            zero_copy_only=False))
        if not self.k:
            return np.full(len(self.slot), default)
        return np.where(self.slot >= 0, values[np.maximum(self.slot, 0)], default)

    def combined(self, name: str, values: pa.Array) -> pa.Array:
        """State column ``name`` followed by ``values`` (positions ``k + row`` are rows)."""
        return pa.concat_arrays([column(self.state, name).cast(values.type), values])

    def cumsum(self, inc: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Per-key running sum of int64 ``inc`` seeded with ``base`` per group, in row order.

        One global cumsum minus each group's offset (exact, modulo 2**64).
        """
        out = np.empty(len(inc), dtype=np.int64)
        g = self.groups
        with np.errstate(over="ignore"):
            run = np.cumsum(inc[g.order])
            before = (run - inc[g.order])[g.starts[:-1]] if len(run) else run
            out[g.order] = run - np.repeat(before - base.astype(np.int64), self.sizes)
        return out

    def exact_cumsum(self, values: pa.Array, name: str) -> tuple[np.ndarray, pa.Array]:
        """Exactly rounded running sums of floating ``values`` per key, seeded by state ``name``.

        Returns the sum after every row and an array holding each key's new exact partial at
        its last row (see :data:`Result`).
        """
        g, n = self.groups, len(values)
        out = np.zeros(n)
        if not n:
            return out, pa.nulls(0, PARTIAL_TYPE)
        base = exact_partials.from_arrow(take(column(self.state, name), self.slot))
        numbers = values.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
        out[g.order], ends = running_sums(numbers[g.order], g.starts, base)
        slot_of_row = np.full(n, -1)
        slot_of_row[self.groups.last_rows()] = np.arange(len(g))
        return out, take(exact_partials.to_arrow(ends), slot_of_row)


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _count(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    spec, n = agg.spec, pk.rows.num_rows
    if agg.predicate is not None:
        inc = agg.predicate.evaluate(pk.rows).astype(np.int64)
    elif spec.column == "*":
        inc = np.ones(n, dtype=np.int64)
    else:
        inc = _valid(column(pk.rows, str(spec.column))).astype(np.int64)
    run = pa.array(pk.cumsum(inc, pk.carried(f"c{i}", 0)), pa.int64())
    return run, {f"c{i}": run}


def _sum(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    values = column(pk.rows, str(agg.spec.column))
    if exact_partials.is_exact(agg):
        total, state = pk.exact_cumsum(values, f"s{i}")
    else:
        numbers = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        total = pk.cumsum(numbers, pk.carried(f"s{i}", 0))
        state = pa.array(total)
    count = pk.cumsum(_valid(values).astype(np.int64), pk.carried(f"n{i}", 0))
    if agg.spec.func == "avg":
        with np.errstate(invalid="ignore", divide="ignore"):
            result = pa.array(total.astype(np.float64) / count, mask=count == 0)
    else:
        result = pa.array(total, mask=count == 0)
    return result, {f"s{i}": state, f"n{i}": pa.array(count)}


def _earliest_extreme(pk: _Packet, order: pa.Array, largest: bool) -> np.ndarray:
    """Per row, the position in ``order`` (state rows, then the packet's) of its key's extreme.

    The extreme so far is the largest (smallest) non-null order, the earliest of equal ones;
    -1 while the key has none.
    """
    m = len(order)
    rank = np.asarray(pc.rank(order, sort_keys="ascending", tiebreaker="dense"),
                      dtype=np.int64)
    if largest:
        rank = rank.max(initial=0) + 1 - rank
    none = (int(rank.max(initial=0)) + 2) * m  # larger than every valid (rank, position)
    order_key = np.where(_valid(order), rank * m + np.arange(m), none)
    src = np.empty(pk.rows.num_rows, dtype=np.int64)
    for g, slot in enumerate(pk.slot):  # one iteration per distinct key, not per tuple
        rows = pk.groups.rows(g)
        start = [order_key[slot]] if slot >= 0 else []
        run = np.minimum.accumulate(np.concatenate((start, order_key[pk.k + rows])))
        src[rows] = run[len(start):]
    out: np.ndarray = np.where(src < none, src % max(m, 1), -1)
    return out


def _extreme(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    combined = pk.combined(f"v{i}", column(pk.rows, str(agg.spec.column)))
    value = take(combined, _earliest_extreme(pk, combined, agg.spec.func == "max"))
    return value, {f"v{i}": value}


def _by_order(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    values = pk.combined(f"v{i}", column(pk.rows, str(agg.spec.column)))
    order = pk.combined(f"o{i}", column(pk.rows, str(agg.spec.order)))
    src = _earliest_extreme(pk, order, agg.spec.func == "max_by")
    value = take(values, src)
    return value, {f"v{i}": value, f"o{i}": take(order, src)}


def _first(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    combined = pk.combined(f"v{i}", column(pk.rows, str(agg.spec.column)))
    g, n = pk.groups, pk.rows.num_rows
    hit = (agg.predicate.evaluate(pk.rows) if agg.predicate is not None
           else np.ones(n, dtype=bool))
    big = np.iinfo(np.int64).max
    first_hit = (np.minimum.reduceat(np.where(hit[g.order], g.order, big), g.starts[:-1])
                 if n else np.zeros(0, np.int64))
    found = pk.carried(f"h{i}", False).astype(bool)
    row_hit = pk.per_row(first_hit)
    src = np.where(pk.per_row(found), pk.per_row(pk.slot),
                   np.where(np.arange(n) >= row_hit, pk.k + row_hit, -1))
    return take(combined, src), {f"v{i}": take(combined, src), f"h{i}": pa.array(src >= 0)}


def _last_where(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    combined = pk.combined(f"v{i}", column(pk.rows, str(agg.spec.column)))
    g, n = pk.groups, pk.rows.num_rows
    assert agg.predicate is not None
    hit = agg.predicate.evaluate(pk.rows)
    found = pk.carried(f"h{i}", False).astype(bool)
    init = np.where(found, pk.slot, -1)
    # Segmented running max without a loop: offset group j by j * span, so that every value of
    # a group exceeds every value of the groups before it in ``order``.
    span = len(combined) + 2
    sorted_group = g.group[g.order]
    candidate = np.where(hit[g.order], pk.k + g.order, -1)
    if n:
        candidate[g.starts[:-1]] = np.maximum(candidate[g.starts[:-1]], init)
    run = np.maximum.accumulate(sorted_group * span + candidate + 1) - sorted_group * span - 1
    src = np.empty(n, dtype=np.int64)
    src[g.order] = run
    return take(combined, src), {f"v{i}": take(combined, src), f"h{i}": pa.array(src >= 0)}


def _last(pk: _Packet, agg: BoundAggregate, i: int) -> Result:
    return column(pk.rows, str(agg.spec.column)), {}


_KERNELS: dict[str, Callable[[_Packet, BoundAggregate, int], Result]] = {
    "count": _count, "count_where": _count, "sum": _sum, "avg": _sum, "min": _extreme,
    "max": _extreme, "first": _first, "first_where": _first, "last": _last,
    "last_where": _last_where, "max_by": _by_order, "min_by": _by_order,
}


def _state_fields(agg: BoundAggregate, i: int) -> list[pa.Field]:
    func = agg.spec.func
    if func in ("count", "count_where"):
        return [pa.field(f"c{i}", pa.int64())]
    if func in ("sum", "avg"):
        total = PARTIAL_TYPE if exact_partials.is_exact(agg) else pa.int64()
        return [pa.field(f"s{i}", total), pa.field(f"n{i}", pa.int64())]
    value = pa.field(f"v{i}", agg.input_type)
    if func in ("min", "max"):
        return [value]
    if agg.order_type is not None:
        return [value, pa.field(f"o{i}", agg.order_type)]
    return [value, pa.field(f"h{i}", pa.bool_())] if func != "last" else []


@register
class RunningAggregate(RowOperator):
    """``running(<aggregate>, ...)`` (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: no aggregate, keyword arguments, a malformed aggregate, an unknown or
        ill-typed column, a stage alias with several aggregates, or an output name that clashes.
    """

    name = "running"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        if not stage.args or stage.kwargs:
            raise stage.fail("expected aggregates, e.g. running(sum(kwh) as total, count(*))")
        try:
            specs = parse_aggregates(list(stage.args))
            if stage.alias is not None:
                if len(specs) != 1:
                    raise stage.fail("'as' names a single aggregate; name each aggregate "
                                     "inside the parentheses instead")
                specs = [replace(specs[0], alias=stage.alias)]
            self.bound = [bind(spec, input_schema) for spec in specs]
        except ExpressionError as exc:
            raise stage.fail(str(exc)) from exc
        for name in key_columns:
            self.require_column(name, "key column")
        self.added = [pa.field(b.spec.alias, b.output_type) for b in self.bound]
        self.check_new_names()
        fields = [f for i, b in enumerate(self.bound) for f in _state_fields(b, i)]
        self._state = pa.schema([*key_fields(input_schema, key_columns), *fields]).empty_table()

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Append the running aggregates of each tuple's key (state carried across calls)."""
        pk = _Packet(rows, self.key_columns, self._state)
        keys = pk.groups.keys
        outputs, after = [], dict(zip(keys.column_names, keys.columns, strict=True))
        last = pa.array(pk.groups.last_rows())
        for i, agg in enumerate(self.bound):
            output, states = _KERNELS[agg.spec.func](pk, agg, i)
            outputs.append(output)
            after.update({name: values.take(last) for name, values in states.items()})
        if rows.num_rows:
            new = pa.table(after).cast(self._state.schema)
            self._state = merge_state(self._state, new, pk.slot[pk.slot >= 0])
        return self.emit(rows, outputs)

    def state_tables(self) -> dict[str, pa.Table]:
        """The per-key state table."""
        return {"running": self._state}

    def load_state(self, tables: dict[str, pa.Table]) -> None:
        """Adopt a restored state table."""
        self._state = tables["running"]
