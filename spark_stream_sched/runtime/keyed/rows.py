"""Built-in row operators delta, lag and where; importing it also registers running and dedup.

Row operators are partitioned stateful operators (Prasaad et al. 2018, §2.1) that return one row per
input tuple they keep, in input order, with every input column followed by the columns they add
(:mod:`~spark_stream_sched.runtime.keyed.base`). Each sees the tuples of a key in the total order
``(ts, input, seq)`` and carries per-key state across :meth:`update` calls, so the output never
depends on how the rows were cut into calls.

``delta(col) [as name]``
    ``col`` minus ``col`` of the key's previous tuple. The previous tuple is the previous one
    whatever its value: the result is null for the key's first tuple and whenever either value
    is null (Spark's ``col - lag(col)``). Integer columns give int64 (wrapping at 64 bits),
    floating columns float64, timestamp columns the difference in int64 milliseconds. Default
    name ``delta_<col>``.
``lag(col[, n]) [as name]``
    ``col`` of the tuple ``n`` tuples earlier for the key (``n >= 1``, default 1), null when the
    key has fewer; the column's own type. State: the key's last ``n`` values. Default name
    ``lag_<col>_<n>``.
``where(<predicate>)``
    Stateless filter: keeps the tuples for which the predicate is true (null counts as false;
    grammar in :mod:`~spark_stream_sched.runtime.expr`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ExpressionError
from spark_stream_sched.runtime.keyed.base import register
from spark_stream_sched.runtime.keyed.groups import (
    KeyGroups,
    RowOperator,
    column,
    find,
    key_fields,
    lookup,
    merge_state,
    take,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.predicate import Predicate

_MS_DIVISOR = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}


def numeric_values(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(numbers, valid)`` of a numeric column; timestamps in int64 ms (floor), nulls as 0."""
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    kind = values.type
    if pa.types.is_timestamp(kind):
        raw = np.asarray(values.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64)
        divisor = _MS_DIVISOR[kind.unit]
        return (raw * -divisor if divisor < 0 else raw // divisor), valid
    dtype = np.float64 if pa.types.is_floating(kind) else np.int64
    return np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False)).astype(dtype), valid


@register
class Delta(RowOperator):
    """``delta(col) [as name]`` (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: not exactly one column, an unknown or non-numeric column.
    """

    name = "delta"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        if len(stage.args) != 1 or stage.kwargs:
            raise stage.fail("expected one column: delta(col) [as name]")
        self.column = stage.args[0]
        kind = self.require_column(self.column)
        if pa.types.is_floating(kind):
            out: pa.DataType = pa.float64()
        elif pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
            out = pa.int64()
        else:
            raise stage.fail(f"column {self.column!r} is {kind}, not numeric; delta needs an "
                             f"integer, floating or timestamp column")
        for name in key_columns:
            self.require_column(name, "key column")
        self.added = [pa.field(stage.alias or f"delta_{self.column}", out)]
        self.check_new_names()
        self._state = pa.schema([*key_fields(input_schema, key_columns),
                                 ("previous", out)]).empty_table()

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Append each tuple's difference to the key's previous tuple."""
        g = KeyGroups.of(rows, self.key_columns)
        slot = lookup(self._state, g)
        k, out_type = self._state.num_rows, self.added[0].type
        values, valid = numeric_values(column(rows, self.column))
        carried, carried_valid = numeric_values(column(self._state, "previous"))
        all_values = np.concatenate((carried.astype(values.dtype), values))
        all_valid = np.concatenate((carried_valid, valid))
        previous = np.empty(rows.num_rows, dtype=np.int64)
        if rows.num_rows:
            previous[g.order] = np.concatenate(([-1], k + g.order[:-1]))
            previous[g.order[g.starts[:-1]]] = slot
        ok = (previous >= 0) & valid & all_valid[np.maximum(previous, 0)]
        with np.errstate(over="ignore", invalid="ignore"):
            diff = values - all_values[np.maximum(previous, 0)]
        last = g.last_rows()
        new = g.keys.append_column("previous",
                                   pa.array(values[last], out_type, mask=~valid[last]))
        self._state = merge_state(self._state, new, slot[slot >= 0])
        return self.emit(rows, [pa.array(diff, out_type, mask=~ok)])

    def state_tables(self) -> dict[str, pa.Table]:
        """Each key's previous value (null if it was null)."""
        return {"delta": self._state}

    def load_state(self, tables: dict[str, pa.Table]) -> None:
        """Adopt a restored state table."""
        self._state = tables["delta"]


@register
class Lag(RowOperator):
    """``lag(col[, n]) [as name]`` (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: an unknown column, or ``n`` not an integer ``>= 1``.
    """

    name = "lag"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        if len(stage.args) not in (1, 2) or stage.kwargs:
            raise stage.fail("expected a column and an offset: lag(col, n) [as name]")
        self.column = stage.args[0]
        kind = self.require_column(self.column)
        text = stage.args[1] if len(stage.args) == 2 else "1"
        if not text.strip().isdigit() or int(text) < 1:
            raise stage.fail(f"the offset n must be an integer >= 1, got {text!r}")
        self.n = int(text)
        for name in key_columns:
            self.require_column(name, "key column")
        self.added = [pa.field(stage.alias or f"lag_{self.column}_{self.n}", kind)]
        self.check_new_names()
        self._history = pa.schema([*key_fields(input_schema, key_columns),
                                   ("position", pa.int64()), ("value", kind)]).empty_table()

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Append to each tuple the value ``n`` tuples earlier for its key."""
        g, n, k = KeyGroups.of(rows, self.key_columns), self.n, self._history.num_rows
        # Each key's history rows, oldest first: hist[first[g] : first[g] + held[g]].
        which, hist = find(self._history, g)
        held = np.bincount(which, minlength=len(g))
        first = np.cumsum(held) - held
        values = pa.concat_arrays([column(self._history, "value"), column(rows, self.column)])
        back = g.rank() - n  # < 0: the value is in the history (or missing)
        in_rows = g.order[np.minimum(g.starts[g.group] + np.maximum(back, 0), len(g.order) - 1)]
        in_history = (back < 0) & (held[g.group] + back >= 0)
        at = np.where(in_history, (first + held)[g.group] + back, len(hist))
        src = np.where(back >= 0, k + in_rows, np.append(hist, -1)[at])
        keep = []
        for i in range(len(g)):  # one iteration per distinct key, not per tuple
            keep.append(np.concatenate((hist[first[i]:first[i] + held[i]], k + g.rows(i)))[-n:])
        if keep:
            kept = np.concatenate(keep)
            sizes = [len(part) for part in keep]
            new = g.keys.take(pa.array(np.repeat(np.arange(len(g)), sizes), pa.int64()))
            new = new.append_column("position", pa.array(
                np.concatenate([np.arange(s) for s in sizes]), pa.int64()))
            new = new.append_column("value", values.take(pa.array(kept)))
            self._history = merge_state(self._history, new, hist, ("position",))
        return self.emit(rows, [take(values, src)])

    def state_tables(self) -> dict[str, pa.Table]:
        """Each key's last ``n`` values, oldest first."""
        return {"lag": self._history}

    def load_state(self, tables: dict[str, pa.Table]) -> None:
        """Adopt a restored state table."""
        self._history = tables["lag"]


@register
class Where(RowOperator):
    """``where(<predicate>)``: a stateless filter (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: not exactly one predicate, a malformed or ill-typed predicate.
    """

    name = "where"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        if len(stage.args) != 1 or stage.kwargs or stage.alias:
            raise stage.fail("expected one predicate, no keyword and no alias: "
                             "where(kind = 'alarm')")
        try:
            self.predicate = Predicate.compile(stage.args[0], input_schema)
        except ExpressionError as exc:
            raise stage.fail(str(exc)) from exc
        self.added = []

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """The rows for which the predicate is true, in input order."""
        return self.emit(rows.filter(pa.array(self.predicate.evaluate(rows))), [])


# Registers the operators defined in their own modules when the built-ins are loaded.
from spark_stream_sched.runtime.keyed import dedup as _dedup  # noqa: E402, F401, I001
from spark_stream_sched.runtime.keyed import running as _running  # noqa: E402, F401
