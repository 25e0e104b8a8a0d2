"""Order-sensitive runtime operators: window aggregation and keyed running aggregates.

Both keep state across packets, so the engine feeds them packets strictly in sequence (a
reorder buffer in front, seed 002 §4) and never runs one on two packets at once. Their
results are therefore those of a sequential evaluation whatever the strategy and worker count.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.exact_sum import ExactSums, concat, running_sums
from spark_stream_sched.runtime.executor.operators import RuntimeOperator, _assign
from spark_stream_sched.runtime.keys import key_hash
from spark_stream_sched.runtime.plan.operators import OperatorDef
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec

KEYED_FUNCTIONS = ("running_count", "running_sum")


class WindowOperator(RuntimeOperator):
    """``window_aggregate``: wraps :class:`~spark_stream_sched.runtime.window.WindowAggregator`.

    The packet watermark is the ready bound ``R``: windows with ``window_end <= R`` are emitted
    as soon as the packet that raised ``R`` is processed (the W-Hive of *Efficient data
    streaming multiway aggregation through concurrent algorithmic designs and new abstract data
    types*, §3).

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
    of ``docs/aggregates.md``; the key's exact partial is its state).
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
        self._state: dict[int, int] = {}
        self._hashes = np.zeros(0, np.uint64)  # keys with a float sum, sorted
        self._sums = ExactSums.zeros(0)  # their exact partials, in that order
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
        n = table.num_rows
        result = np.zeros(n, dtype=self._dtype)
        if n:
            uniq, inverse = np.unique(key_hash(table, self.keys), return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            starts = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
            values, keys = self._values(table)[order], uniq.tolist()
            if self._dtype == np.float64:
                result[order] = self._float_sums(uniq, values, starts)
            else:
                # One Python iteration per distinct key of the packet (not per tuple).
                for j, key in enumerate(keys):
                    run = np.cumsum(values[starts[j]:starts[j + 1]], dtype=np.int64)
                    run += self._state.get(key, 0)
                    result[order[starts[j]:starts[j + 1]]] = run
                    self._state[key] = int(run[-1])
        return _assign(table, self.output, pa.array(result))

    def _float_sums(self, keys: np.ndarray, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Exactly rounded running sums of ``values`` (grouped by the sorted ``keys``).

        The state is one exact partial per key, looked up and replaced for all keys at once.
        """
        at = np.searchsorted(self._hashes, keys)
        known = at < len(self._hashes)
        known[known] = self._hashes[at[known]] == keys[known]
        stored = concat([self._sums, ExactSums.zeros(1)])  # the last one: a new key's zero
        sums, ends = running_sums(values, starts,
                                  stored.take(np.where(known, at, len(self._hashes))))
        kept = np.ones(len(self._hashes), bool)
        kept[at[known]] = False
        hashes = np.concatenate([self._hashes[kept], keys])
        order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[order]
        self._sums = concat([self._sums.take(np.flatnonzero(kept)), ends]).take(order)
        return sums
