"""Order-sensitive runtime operators: window aggregation and keyed running aggregates.

Both keep state across packets, so the engine feeds them packets strictly in sequence (a
reorder buffer in front, Prasaad et al. (2018), §4) and never runs one on two packets at once. Their
results are therefore those of a sequential evaluation whatever the strategy and worker count.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE, from_arrow, to_arrow
from spark_stream_sched.runtime.exact_sum import ExactSums, concat, running_sums
from spark_stream_sched.runtime.executor.operators import RuntimeOperator, _assign
from spark_stream_sched.runtime.keyed.groups import KeyGroups, key_fields, lookup, merge_state
from spark_stream_sched.runtime.plan.operators import OperatorDef
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec

KEYED_FUNCTIONS = ("running_count", "running_sum")


class WindowOperator(RuntimeOperator):
    """``window_aggregate``: wraps :class:`~spark_stream_sched.runtime.window.WindowAggregator`.

    The packet watermark is the ready bound ``R``: windows with ``window_end <= R`` are emitted
    as soon as the packet that raised ``R`` is processed (the Window Hive of Gulisano et al.
    (2016), §3, §5.6).

    Two optional parameters let a caller run one step of a longer stream (the Spark source runs
    each micro-batch this way): ``state``, snapshot bytes of a
    :class:`~spark_stream_sched.runtime.window.WindowAggregator` to continue from, and
    ``bound``, a ready bound fixed by the caller (``None``: not known yet) that replaces the
    packet watermarks; with ``bound`` given, the end of the run emits only the windows that
    bound closes instead of flushing every open window.
    """

    ordered = True

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema, ts_column: str) -> None:
        super().__init__(definition, input_schema)
        spec = WindowSpec.parse(self.param("size"), self.params.get("slide"))
        keys = [str(k) for k in self.params.get("keys", [])]
        aggregates = self.param("aggregates")
        ts = str(self.params.get("ts", ts_column))
        state = self.params.get("state")
        self.aggregator = (WindowAggregator.restore(state) if state is not None else
                           WindowAggregator(spec, keys, aggregates, ts, input_schema))
        self.fixed_bound = "bound" in self.params
        self.bound: int | None = self.params.get("bound")
        self.output_schema = self.aggregator.output_schema

    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Add the packet's rows; emit the windows its watermark closes.

        With a fixed bound nothing is emitted here: the caller released every row of the run
        below that bound, so closing windows at the first packet would make the rows of later
        packets late. :meth:`finish` applies the bound once, after the last packet.
        """
        return self.aggregator.update(table, None if self.fixed_bound else watermark)

    def finish(self) -> pa.Table:
        """Emit every window still open (only those the fixed bound closes, if one was given)."""
        if self.fixed_bound:
            return self.aggregator.update(self.input_schema.empty_table(), self.bound)
        return self.aggregator.finish()

    @property
    def state_bytes(self) -> int:
        """Bytes of window state held."""
        return self.aggregator.state_bytes


class KeyedOperator(RuntimeOperator):
    """``keyed``: a per-key running aggregate appended as column ``output``.

    ``running_count`` numbers the tuples of each key 1, 2, ...; ``running_sum`` adds up
    ``column`` per key (nulls add nothing): integers in int64, floats exactly rounded (the rule
    of ``docs/aggregates.md``; the key's exact partial is its state). Keys are equal when their
    values are (nulls are one key, ``-0.0`` is ``0.0``): each key's running value is kept with
    its values (:func:`~spark_stream_sched.runtime.keyed.groups.find`), never under its hash
    alone.
    """

    ordered = True

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema) -> None:
        super().__init__(definition, input_schema)
        self.keys = [str(k) for k in self.param("keys")]
        self.function = str(self.params.get("function", "running_count"))
        if self.function not in KEYED_FUNCTIONS:
            raise ConfigError(f"operator {self.op_id!r}: keyed function {self.function!r} is "
                              f"unknown; use one of {KEYED_FUNCTIONS}")
        self.output = str(self.params.get("output", self.function))
        self.column = str(self.param("column")) if self.function == "running_sum" else None
        for name in [*self.keys, *([self.column] if self.column else [])]:
            if name not in input_schema.names:
                raise ConfigError(f"operator {self.op_id!r}: unknown column {name!r}; "
                                  f"columns are {input_schema.names}")
        self._dtype = self._value_type(input_schema)
        value_type = PARTIAL_TYPE if self._dtype == np.float64 else pa.int64()
        self._state = pa.schema([*key_fields(input_schema, self.keys),
                                 ("value", value_type)]).empty_table()
        self.output_schema = self.apply(input_schema.empty_table(), None).schema

    def _value_type(self, schema: pa.Schema) -> np.dtype[np.generic]:
        if self.column is None or pa.types.is_integer(schema.field(self.column).type):
            return np.dtype(np.int64)
        return np.dtype(np.float64)

    def _values(self, table: pa.Table) -> np.ndarray:
        if self.column is None:
            return np.ones(table.num_rows, dtype=self._dtype)
        col = table.column(self.column).fill_null(0)
        return np.asarray(col.to_numpy(), dtype=self._dtype)

    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Return the packet with the running aggregate of each tuple's key appended."""
        result = np.zeros(table.num_rows, dtype=self._dtype)
        if not table.num_rows:
            return _assign(table, self.output, pa.array(result))
        groups = KeyGroups.of(table, self.keys)
        slot = lookup(self._state, groups)
        values = self._values(table)[groups.order]
        if self._dtype == np.float64:
            held = concat([from_arrow(self._state.column("value")), ExactSums.zeros(1)])
            base = held.take(np.where(slot >= 0, slot, self._state.num_rows))
            sums, ends = running_sums(values, groups.starts, base)
            result[groups.order] = sums
            last: pa.Array = to_arrow(ends)
        else:
            held_int = np.append(np.asarray(self._state.column("value").to_numpy(),
                                            dtype=np.int64), 0)  # the last one: a new key's
            base_int = held_int[np.where(slot >= 0, slot, self._state.num_rows)]
            run = np.cumsum(values, dtype=np.int64)
            offsets = np.concatenate(([0], run))[groups.starts[:-1]]
            run += np.repeat(base_int - offsets, np.diff(groups.starts))
            result[groups.order] = run
            last = pa.array(run[groups.starts[1:] - 1])
        new = groups.keys.append_column("value", last)
        self._state = merge_state(self._state, new, slot[slot >= 0])
        return _assign(table, self.output, pa.array(result))
