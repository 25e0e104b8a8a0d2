"""A query's per-key pipeline: keyed operators in sequence, then an optional window aggregate.

After S-Merge (and the query's ``where``) the released rows of one partition group go through
the stages in order — each row operator (``delta``, ``lag``, ``running``, ``dedup``, ``where``,
``udf``) receives the previous stage's rows, still in the total order ``(ts, input, seq)`` —
and end in one of three ways:

* a window aggregate (the query has ``window``): the result is windows, as without operators;
* a closing operator (``sessionize``): the result is the sessions the ready bound closed;
* a row operator: the result is rows, in the total order of the tuples that produced them.

Every stage is a partitioned stateful operator of Prasaad et al. (2018), §2: it sees each key's
tuples in the total order and keeps state per key, so the pipeline over a partition group is the
pipeline over each of its keys, and splitting the keys over partition groups, Spark tasks or workers
cannot change a result. A :class:`Pipeline` has the contract of
:class:`~spark_stream_sched.runtime.window.aggregator.WindowAggregator` (``update(rows, bound)``,
``finish()``, ``snapshot()``/``restore()``), so the Spark source, the sink and the CLI run it
exactly where they ran windows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator, build_operator, operator_class
from spark_stream_sched.runtime.keyed.stage import StageSpec, parse_stage
from spark_stream_sched.runtime.order_codes import lexicographic_codes
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.runtime.window.aggregator import WINDOW_END, WINDOW_START, WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec

KIND = "keyed_pipeline"
#: Names of a session's bounds (Spark's ``session_window`` struct, flattened).
SESSION_START = "session_start"
SESSION_END = "session_end"
INTERNAL = (INPUT_COL, SEQ_COL)


def parse_stages(texts: Sequence[str]) -> list[StageSpec]:
    """Parse stage texts and check their sequence (a closing operator can only be last)."""
    stages = [parse_stage(t) for t in texts]
    for stage in stages[:-1]:
        if not operator_class(stage.name).emits_rows:
            raise stage.fail("closes groups of rows, so it must be the last operator")
    return stages


def with_internal_columns(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus ``__input``/``__seq`` (what released rows carry), if it lacks them."""
    for name, kind in ((INPUT_COL, pa.int32()), (SEQ_COL, pa.int64())):
        if name not in schema.names:
            schema = schema.append(pa.field(name, kind))
    return schema


def result_order(operators: Sequence[str], has_window: bool, key_columns: Sequence[str],
                 ts_column: str) -> list[str]:
    """Columns whose ascending order is a query's result order across partition groups.

    Windows: ``(window_end, window_start, keys)`` (also without operators); sessions
    ``(session_end, session_start, keys)``; rows: the total order of the tuples that produced
    them. Derived from the definition alone: nothing is built.
    """
    if has_window or not operators:
        return [WINDOW_END, WINDOW_START, *key_columns]
    if not operator_class(parse_stage(operators[-1]).name).emits_rows:
        return [SESSION_END, SESSION_START, *key_columns]
    return [ts_column, INPUT_COL, SEQ_COL]


def sort_ascending(out: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``out`` sorted by ``columns`` ascending, nulls first (stable).

    NumPy's stable sort of one order-preserving code per row
    (:func:`.order_codes.lexicographic_codes`) merges the sorted runs a batch's results arrive
    in (one per partition group), several times faster than Arrow's multi-column sort, which
    is kept for floating and nested columns (``-0.0`` and ``0.0``, or two NaNs, tie in a sort
    but are distinct values to the codes' hash).
    """
    if out.num_rows < 2:
        return out
    if any(pa.types.is_floating(t) or pa.types.is_nested(t)
           for t in (out.column(n).type for n in columns)):
        keys = [(n, "ascending", "at_start") for n in columns]
        return out.take(pc.sort_indices(out, sort_keys=keys))
    codes, _ = lexicographic_codes(out, columns)
    return out.take(pa.array(np.argsort(codes, kind="stable")))


def without_internal_columns(out: pa.Table) -> pa.Table:
    """``out`` without the internal ``__input``/``__seq`` columns."""
    return out.drop_columns([n for n in INTERNAL if n in out.column_names])


class Pipeline:
    """Keyed stages then an optional window aggregate over one partition group's rows.

    Parameters
    ----------
    stages
        Parsed stages (:func:`parse_stages`), at least one.
    window
        The window aggregate's spec, or None (the last stage gives the result).
    key_columns, aggregates, ts_column
        The query's; ``aggregates`` belong to the window, or to a closing last stage.
    input_schema
        Schema of the released rows (``__input``/``__seq`` are added if missing).
    """

    def __init__(self, stages: Sequence[StageSpec], window: WindowSpec | None,
                 key_columns: Sequence[str], aggregates: Sequence[str], ts_column: str,
                 input_schema: pa.Schema, *, _operators: list[KeyedOperator] | None = None,
                 _window: WindowAggregator | None = None) -> None:
        if not stages:
            raise ConfigError("a pipeline needs at least one operator")
        self.stages = list(stages)
        self.window_spec = window
        self.key_columns = list(key_columns)
        self.aggregates = tuple(aggregates)
        self.ts_column = ts_column
        if _operators is not None:
            self.operators, self.window = _operators, _window
            return
        schema = with_internal_columns(input_schema)
        self.operators = []
        for stage in self.stages:
            closing = not operator_class(stage.name).emits_rows
            op = build_operator(stage, schema, self.key_columns, ts_column,
                                self.aggregates if closing else ())
            self.operators.append(op)
            schema = op.output_schema
        self.window = None
        if window is not None:
            if not self.operators[-1].emits_rows:
                raise self.stages[-1].fail("closes sessions itself; drop the window option or "
                                           "the operator")
            self.window = WindowAggregator(window, self.key_columns, list(self.aggregates),
                                           ts_column, schema)

    # -- shape -------------------------------------------------------------------------------

    @property
    def emits_rows(self) -> bool:
        """True when the result is rows (no window, the last stage a row operator)."""
        return self.window is None and self.operators[-1].emits_rows

    @property
    def output_schema(self) -> pa.Schema:
        """Schema of :meth:`update`'s result (row results keep ``__input``/``__seq``)."""
        return (self.window or self.operators[-1]).output_schema

    @property
    def public_schema(self) -> pa.Schema:
        """Schema of the rows users get (:meth:`public`)."""
        schema = self.output_schema
        for name in INTERNAL:
            if name in schema.names:
                schema = schema.remove(schema.get_field_index(name))
        return schema

    def order_columns(self) -> list[str]:
        """Columns whose ascending order is the result's order (see :func:`result_order`)."""
        return result_order([s.text() for s in self.stages], self.window is not None,
                            self.key_columns, self.ts_column)

    def in_order(self, out: pa.Table) -> pa.Table:
        """Result rows of several groups (or calls) sorted by :meth:`order_columns`."""
        return sort_ascending(out, self.order_columns())

    def public(self, out: pa.Table) -> pa.Table:
        """``out`` without the internal ``__input``/``__seq`` columns."""
        return without_internal_columns(out)

    # -- running ------------------------------------------------------------------------------

    def update(self, rows: pa.Table, bound: int | None, hold: int | None = None) -> pa.Table:
        """Push released rows through every stage; return what the pipeline emits.

        Contract of :meth:`WindowAggregator.update`: ``rows`` in the total order, every tuple
        with ``ts < bound`` not given before; bounds never decrease. Each stage passes on the
        bound its output proves (:meth:`~.base.KeyedOperator.output_bound`: a join with state
        on disk holds results back, so the stages after it see a lower bound). ``hold``: the
        least ``H`` of the whole query (other partition groups' joins): a join also holds back
        what those could precede (:attr:`~.base.KeyedOperator.hold_cap`).
        """
        for op in self.operators:
            op.hold_cap = hold
            rows = op.update(rows, bound)
            bound = op.output_bound(bound)
        return rows if self.window is None else self.window.update(rows, bound)

    def finish(self) -> pa.Table:
        """End of input: flush every stage in order (each stage's tail through the rest)."""
        carry: pa.Table | None = None
        for op in self.operators:
            produced = op.update(carry, None) if carry is not None else None
            tail = op.finish()
            carry = tail if produced is None else pa.concat_tables([produced, tail])
        if self.window is None:
            assert carry is not None
            return carry
        if carry is not None and carry.num_rows:
            self.window.update(carry, None)
        return self.window.finish()

    @property
    def state_bytes(self) -> int:
        """Bytes of state held by every stage."""
        total = sum(op.state_bytes for op in self.operators)
        return total + (self.window.state_bytes if self.window is not None else 0)

    # -- state ---------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Every stage's snapshot in one checksummed snapshot (never pickle)."""
        tables = {f"op{i}": pa.table({"b": [op.snapshot()]})
                  for i, op in enumerate(self.operators)}
        if self.window is not None:
            tables["window"] = pa.table({"b": [self.window.snapshot()]})
        meta = {"stages": [s.text() for s in self.stages], "keys": self.key_columns,
                "aggregates": list(self.aggregates), "ts": self.ts_column,
                "window": None if self.window_spec is None else
                [self.window_spec.size_ms, self.window_spec.slide_ms]}
        return snapshot.encode(KIND, meta, tables)

    @classmethod
    def restore(cls, data: bytes, stages: Sequence[StageSpec]) -> Pipeline:
        """Rebuild the query's pipeline from :meth:`snapshot` bytes.

        ``stages`` are the query's own (:func:`parse_stages` of its definition): only they are
        restored, and they are compared with the snapshot's before anything is imported, so a
        state file cannot choose the code that runs (``udf`` names a module).

        Raises
        ------
        StateError
            Corrupt bytes, another kind of state, or stages other than ``stages`` (naming both).
        """
        meta, tables = snapshot.decode(data, KIND)
        held, wanted = [str(t) for t in meta.get("stages", [])], [s.text() for s in stages]
        if held != wanted:
            raise StateError(f"the state holds the operators {held} but the query defines "
                             f"{wanted}; the state was written by another query: start it with "
                             f"a new checkpoint location")
        operators = [operator_class(s.name).restore_stage(
            tables[f"op{i}"].column("b")[0].as_py(), s) for i, s in enumerate(stages)]
        window = None
        if "window" in tables:
            window = WindowAggregator.restore(tables["window"].column("b")[0].as_py())
        spec = None if meta["window"] is None else WindowSpec(*meta["window"])
        return cls(list(stages), spec, meta["keys"], meta["aggregates"], meta["ts"],
                   pa.schema([]), _operators=operators, _window=window)
