"""S-Merge followed by ordered window aggregation: the multiway aggregate of seed 004.

:class:`OrderedAggregation` chains the Add / S-Merge stages (:class:`~.merge.SMerge`) and the
Update / Output stages (:class:`~.window.WindowAggregator`) of seed 004 §3: push tuples of any
input in batches of any size, ``poll()`` returns the windows closed so far. The output depends
only on the inputs, never on batch boundaries or the timing of pushes and polls.
"""

from __future__ import annotations

import pyarrow as pa

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime import snapshot
from spark_stream_sched.runtime.aggregates import AggSpec
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import Data, as_table
from spark_stream_sched.runtime.window import WindowAggregator
from spark_stream_sched.runtime.windows import WindowSpec


class OrderedAggregation:
    """Deterministic multiway windowed aggregation over ``n_inputs`` sorted streams.

    Parameters mirror :class:`SMerge` and :class:`WindowAggregator`; ``input_schema`` is the
    schema shared by all inputs.
    """

    def __init__(self, n_inputs: int, spec: WindowSpec, key_columns: list[str],
                 aggregates: list[AggSpec] | list[str] | str, ts_column: str = "ts",
                 out_of_order: str = "fail", input_schema: pa.Schema | None = None,
                 *, _merge: SMerge | None = None,
                 _window: WindowAggregator | None = None) -> None:
        if _merge is not None and _window is not None:
            self.merge, self.window = _merge, _window
            return
        if input_schema is None:
            raise ValueError("input_schema is required")
        self.window = WindowAggregator(spec, key_columns, aggregates, ts_column, input_schema)
        self.merge = SMerge(n_inputs, ts_column, out_of_order)
        # Projection push-down: only the columns the windows read travel through the merge.
        self.merge.schema = pa.schema([input_schema.field(c) for c in self.window.columns])

    def push(self, input_id: int, data: Data) -> None:
        """Buffer the next tuples of one input (see :meth:`SMerge.push`).

        Only the columns the query reads are kept; a missing one is an :class:`InputError`.
        """
        table = as_table(data)
        try:
            table = table.select(self.window.columns)
        except KeyError as exc:
            raise InputError(f"input {input_id} lacks a column the query reads: {exc}; "
                             f"it has {table.column_names}") from exc
        self.merge.push(input_id, table)

    def finish(self, input_id: int) -> None:
        """Declare that an input will send nothing more."""
        self.merge.finish(input_id)

    def poll(self) -> pa.Table:
        """Release ready tuples into the windows and return the windows closed so far."""
        released = self.merge.pop_ready()
        bound = self.merge.ready_bound
        if self.merge.all_finished:
            self.window.update(released, None)
            return self.window.finish()
        return self.window.update(released, bound)

    @property
    def output_schema(self) -> pa.Schema:
        """Schema of the result rows."""
        return self.window.output_schema

    def snapshot(self) -> bytes:
        """Serialise merge and window state together."""
        tables = {"merge": pa.table({"b": [self.merge.snapshot()]}),
                  "window": pa.table({"b": [self.window.snapshot()]})}
        return snapshot.encode("ordered_aggregation", {}, tables)

    @classmethod
    def restore(cls, data: bytes) -> OrderedAggregation:
        """Rebuild from :meth:`snapshot` bytes (StateError if corrupt)."""
        _, tables = snapshot.decode(data, "ordered_aggregation")
        merge = SMerge.restore(tables["merge"].column("b")[0].as_py())
        window = WindowAggregator.restore(tables["window"].column("b")[0].as_py())
        return cls(merge.n_inputs, window.spec, window.key_columns, [], _merge=merge,
                   _window=window)


def aggregate_all(inputs: list[pa.Table], spec: WindowSpec, key_columns: list[str],
                  aggregates: list[AggSpec] | list[str] | str, ts_column: str = "ts",
                  out_of_order: str = "fail") -> pa.Table:
    """Run a whole finite query at once: push every input, finish them, return all windows."""
    query = OrderedAggregation(len(inputs), spec, key_columns, aggregates, ts_column,
                               out_of_order, inputs[0].schema)
    for i, table in enumerate(inputs):
        query.push(i, table)
        query.finish(i)
    return query.poll()
