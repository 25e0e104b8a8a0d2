"""The stateful function behind :func:`~spark_stream_sched.spark.transform.ordered`.

Spark's ``applyInPandasWithState`` calls :class:`OrderedProcessor` once per partition group
and micro-batch with data (every group receives every input's order summary,
:func:`~spark_stream_sched.runtime.engine.packing.pack`). Each call is one run of the engine's
batch entry (:class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`) over that one
group, with the group's state in Spark's state store (RocksDB) through
:class:`~spark_stream_sched.runtime.engine.value_state.ValueStateStore` over the processor's
one value: the rows not ready yet as Arrow IPC bytes, the group operator's
snapshot, the ready bound it last used, each input's largest event time so far (the sequence
check's memory and the ready bound's source, the same in every group) and the query's
fingerprint. Spark versions, commits and prunes that value with its checkpoint. Each call:

1. checks the new rows along each input's sequence (a row below an earlier row's event time of
   its input fails or is dropped, :mod:`~spark_stream_sched.runtime.engine.sequence_order`) and
   adds the batch's summaries to each input's largest event time;
2. takes the ready bound ``R`` as the least of those
   (:func:`~spark_stream_sched.runtime.engine.sequence_order.ready_bound_from_seen`);
3. gives the rows a position ``__seq`` (the sequence column) and runs the group's batch: ready
   rows are released in the total order, the operator emits what ``R`` closed.

It runs without timeouts (``GroupStateTimeout.NoTimeout``): ``R`` moves only in a micro-batch
with data, and then every group runs. ``applyInPandasWithState`` is the cheapest of Spark's
stateful operators that keep state in its state store, measured side by side with
``transformWithStateInPandas`` (whose every state call is a socket round trip to the JVM, and
which runs a Python process on the driver for the schema): docs/benchmarks.md.

Rows cross the Python boundary packed: each group's rows of an input batch as one Arrow IPC
stream, and each call's results as one (:mod:`~spark_stream_sched.runtime.engine.packing`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from spark_stream_sched.runtime.engine.batch import GroupedBatch
from spark_stream_sched.runtime.engine.packing import (
    from_ipc,
    results_frame,
    unpack_frames,
    with_seq,
)
from spark_stream_sched.runtime.engine.sequence_order import (
    BEFORE_COL,
    ready_bound_from_seen,
    seen_after,
    sequence_check,
)
from spark_stream_sched.runtime.engine.value_state import (
    OUT_OF_ORDER,
    ValueStateStore,
)
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps
from spark_stream_sched.spark.worker_errors import reported

__all__ = ["STATE_SCHEMA", "GroupSlot", "OrderedProcessor", "from_ipc"]

log = logging.getLogger(__name__)

#: The group's state value: pending rows (Arrow IPC), operator snapshot, last ready bound used
#: (ms), the fingerprint of the query that wrote it (a changed definition is refused on
#: restart), and each input's largest event time so far (int64 little-endian, ms; the sequence
#: check's memory and the ready bound's source). ``seen`` is bytes, not an array: pyspark 4.3's
#: Python worker cannot read an ``ArrayType`` in an ``applyInPandasWithState`` state schema
#: (``KeyError: 'elementType'`` in ``ArrayType.fromJson``).
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("operator", BinaryType()),
                           StructField("bound", LongType()),
                           StructField("fingerprint", StringType()),
                           StructField("seen", BinaryType())])


class GroupSlot:
    """The value slot ``ValueStateStore`` reads and writes, over a ``GroupState``.

    ``exists``, ``get``, ``update``, ``clear``
    (:class:`~spark_stream_sched.runtime.engine.value_state.ValueStateStore`) over
    ``applyInPandasWithState``'s group state.
    """

    def __init__(self, state: Any) -> None:
        self._state = state

    def exists(self) -> bool:
        """The group has a value."""
        return bool(self._state.exists)

    def get(self) -> tuple[Any, ...]:
        """The group's value, fields in :data:`STATE_SCHEMA`'s order."""
        return tuple(self._state.get)

    def update(self, value: tuple[Any, ...]) -> None:
        """Replace the group's value."""
        self._state.update(value)

    def clear(self) -> None:
        """Remove the group's value."""
        self._state.remove()


class OrderedProcessor:
    """A query's per-group step as the ``applyInPandasWithState`` function (see module doc).

    Parameters
    ----------
    spec:
        The query (windows and aggregates, or keyed operators).
    input_schema:
        The payload columns of the input rows (Arrow types, without ``__input``).
    output_schema:
        The result columns, in the order of the query's output.
    sequence_column:
        The payload column whose ascending order is each input's order (``seq``).
    ts_is_timestamp:
        Window bounds are emitted as timestamps (else int64 milliseconds).

    Notes
    -----
    Built on the driver and pickled to the executors; Spark calls it there once per partition
    group and micro-batch with data, the group as the state's key, without timeouts. Our own
    errors reach Spark's first line with our message
    (:mod:`~spark_stream_sched.spark.worker_errors`).
    """

    def __init__(self, spec: QuerySpec, input_schema: pa.Schema, output_schema: pa.Schema,
                 sequence_column: str, ts_is_timestamp: bool) -> None:
        self.spec = spec
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.sequence_column = sequence_column
        self.ts_is_timestamp = ts_is_timestamp

    @reported
    def __call__(self, key: Any, frames: Iterator[pd.DataFrame], state: Any
                 ) -> Iterator[pd.DataFrame]:
        """New rows and summaries of one partition group: buffer, release what is ready, emit."""
        new, orders = unpack_frames(frames, self._packed_schema())
        out = self._run(int(key[0]), new, orders, GroupSlot(state))
        if out is not None:
            yield out

    # -- one step ----------------------------------------------------------------------------

    def _run(self, group: int, new: pa.Table, orders: pa.Table, slot: Any
             ) -> pd.DataFrame | None:
        """One call: check the rows, move the ready bound, run the group's batch (module doc)."""
        store = ValueStateStore(slot, self.spec, self._rows_schema(), self.sequence_column)
        store.load(group)
        last_bound = store.bound
        new = sequence_check(new, store.seen, orders, self.spec.timestamp_column,
                             self.sequence_column, self.spec.out_of_order)
        store.seen = seen_after(store.seen, orders)
        bound = ready_bound_from_seen(store.seen)
        store.bound = last_bound if bound is None else bound
        batch = GroupedBatch(self.spec, self.input_schema, (group,),
                             late=OUT_OF_ORDER.replace("{column}", self.sequence_column))
        out = batch.run(with_seq(new, self.sequence_column), store, last_bound, bound).output
        if not out.num_rows:
            return None
        out = bounds_as_timestamps(out) if self.ts_is_timestamp else out
        return results_frame(out.select(self.output_schema.names))

    def _packed_schema(self) -> pa.Schema:
        """Schema of the rows :func:`~..packing.pack` sends: payload, ``__input``, ``__before``."""
        return self.input_schema.append(pa.field(INPUT_COL, pa.int32())).append(
            pa.field(BEFORE_COL, pa.int64()))

    def _rows_schema(self) -> pa.Schema:
        """Schema of the rows a group keeps pending: payload, ``__input`` and ``__seq``."""
        seq = self.input_schema.field(self.sequence_column).type
        kind = pa.int64() if pa.types.is_integer(seq) else seq
        return self.input_schema.append(pa.field(INPUT_COL, pa.int32())).append(
            pa.field(SEQ_COL, kind))

