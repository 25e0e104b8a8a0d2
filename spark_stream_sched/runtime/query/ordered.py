"""S-Merge followed by ordered window aggregation: the multiway aggregate of Gulisano et al. (2016).

:class:`OrderedAggregation` chains the Add / S-Merge stages (:class:`~.merge.SMerge`) and the
Update / Output stages (:class:`~spark_stream_sched.runtime.window.WindowAggregator`) of Gulisano et
al. (2016), §3, with an optional filter (``where``) on the merged rows between them: push tuples of
any input in batches of any size, ``poll()`` returns the windows closed so far. The output depends
only on the inputs, never on batch boundaries or the timing of pushes and polls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.aggregates import AggSpec
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import Data, as_table
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec


class GroupOperator(Protocol):
    """What runs per key after the merge: a :class:`WindowAggregator` or a :class:`Pipeline`."""

    @property
    def output_schema(self) -> pa.Schema:
        """Schema of the results."""

    def update(self, rows: pa.Table, ready_bound: int | None) -> pa.Table:
        """Released rows in, results out (see :meth:`WindowAggregator.update`)."""

    def finish(self) -> pa.Table:
        """End of input: everything still open."""

    def snapshot(self) -> bytes:
        """Checksummed snapshot bytes."""

    @property
    def state_bytes(self) -> int:
        """Bytes of state held."""


class OrderedAggregation:
    """Deterministic multiway windowed aggregation over ``n_inputs`` sorted streams.

    Parameters mirror :class:`SMerge` and :class:`WindowAggregator`; ``input_schema`` is the
    schema shared by all inputs; ``where`` keeps only the merged rows matching a predicate.
    Usually built by :meth:`~spark_stream_sched.runtime.query.QuerySpec.build`.
    """

    def __init__(self, n_inputs: int, spec: WindowSpec, key_columns: list[str],
                 aggregates: list[AggSpec] | list[str] | str, ts_column: str = "ts",
                 out_of_order: str = "fail", input_schema: pa.Schema | None = None,
                 *, where: str | None = None, _merge: SMerge | None = None,
                 _window: GroupOperator | None = None) -> None:
        self.window: GroupOperator
        if _merge is not None and _window is not None:
            self.merge, self.window = _merge, _window
            assert _merge.schema is not None
            self.where = None if where is None else Predicate.compile(where, _merge.schema)
            return
        if input_schema is None:
            raise ValueError("input_schema is required")
        self.window = _window or WindowAggregator(spec, key_columns, aggregates, ts_column,
                                                  input_schema)
        self.where = None if where is None else Predicate.compile(where, input_schema)
        self.merge = SMerge(n_inputs, ts_column, out_of_order)
        # Projection push-down: only the columns the query reads travel through the merge
        # (a pipeline may pass any column through, so it reads them all).
        group = self.window
        read = (set(group.columns) if isinstance(group, WindowAggregator) else
                set(input_schema.names)) | (self.where.columns if self.where else set())
        self.merge.schema = pa.schema([f for f in input_schema if f.name in read])

    @classmethod
    def of(cls, n_inputs: int, ts_column: str, out_of_order: str, group: GroupOperator,
           input_schema: pa.Schema, where: str | None = None) -> OrderedAggregation:
        """The merge (+ ``where``) in front of a ready-made per-key ``group`` operator."""
        return cls(n_inputs, WindowSpec(1, 1), [], [], ts_column, out_of_order, input_schema,
                   where=where, _window=group)

    @property
    def columns(self) -> list[str]:
        """Input columns the query reads (windows and filter), in input-schema order."""
        assert self.merge.schema is not None
        return list(self.merge.schema.names)

    def push(self, input_id: int, data: Data) -> None:
        """Buffer the next tuples of one input (see :meth:`SMerge.push`).

        Only the columns the query reads are kept; a missing one is an :class:`InputError`.
        """
        table = as_table(data)
        try:
            table = table.select(self.columns)
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
        if self.where is not None and released.num_rows:
            released = released.filter(pa.array(self.where.evaluate(released)))
        bound = self.merge.ready_bound
        if self.merge.all_finished:
            head = self.window.update(released, None)
            out = pa.concat_tables([head, self.window.finish()])
        else:
            out = self.window.update(released, bound)
        return self.window.public(out) if isinstance(self.window, Pipeline) else out

    @property
    def output_schema(self) -> pa.Schema:
        """Schema of the result rows."""
        if isinstance(self.window, Pipeline):
            return self.window.public_schema
        return self.window.output_schema

    def snapshot(self) -> bytes:
        """Serialise merge and window state together."""
        tables = {"merge": pa.table({"b": [self.merge.snapshot()]}),
                  "window": pa.table({"b": [self.window.snapshot()]})}
        meta = {"where": self.where.text if self.where is not None else None,
                "group": "pipeline" if isinstance(self.window, Pipeline) else "window"}
        return snapshot.encode("ordered_aggregation", meta, tables)

    @classmethod
    def restore(cls, data: bytes, stages: Sequence[StageSpec] = ()) -> OrderedAggregation:
        """Rebuild from :meth:`snapshot` bytes (StateError if corrupt).

        ``stages`` are the query's operators; a pipeline in the snapshot must hold exactly
        those (:meth:`Pipeline.restore`), a query without operators restores windows.
        """
        meta, tables = snapshot.decode(data, "ordered_aggregation")
        merge = SMerge.restore(tables["merge"].column("b")[0].as_py())
        data_w = tables["window"].column("b")[0].as_py()
        window: GroupOperator = (Pipeline.restore(data_w, stages) if stages
                                 else WindowAggregator.restore(data_w))
        return cls(merge.n_inputs, WindowSpec(1, 1), [], [], _merge=merge,
                   where=meta.get("where"), _window=window)


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
