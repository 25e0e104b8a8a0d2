"""The stateful processor behind :func:`~spark_stream_sched.spark.transform.ordered`.

Spark's ``transformWithStateInPandas`` calls :class:`OrderedProcessor` once per partition group
that has new rows or an expired timer in a micro-batch. Each call is one run of the engine's
batch entry (:class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`) over that one
group, with the group's state in Spark's state store (RocksDB) through
:class:`~spark_stream_sched.runtime.engine.value_state.ValueStateStore` over the processor's
one value: the rows not ready yet as Arrow IPC bytes, the group operator's
snapshot, the ready bound it last used, each input's largest event time so far (the sequence
check's memory, the same in every group) and the query's fingerprint. Spark versions, commits and
prunes that value with its checkpoint. Each call:

1. turns the watermark into the ready bound ``R``
   (:func:`~spark_stream_sched.runtime.engine.value_state.ready_bound_from_watermark`);
2. checks the new rows along each input's sequence (a row below an earlier row's event time of
   its input fails or is dropped, :mod:`~spark_stream_sched.runtime.engine.sequence_order`),
   gives them a position ``__seq`` (the sequence column) and runs the group's batch: ready rows
   are released in the total order, the operator emits what ``R`` closed;
3. keeps one event-time timer at ``watermark + 1`` while the group holds anything, so the group
   runs again in the first batch whose watermark is higher, with or without new rows.

Rows cross the Python boundary packed: each group's rows of an input batch as one Arrow IPC
stream, and each call's results as one (:mod:`~spark_stream_sched.runtime.engine.packing`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_stream_sched.runtime.engine.batch import GroupedBatch
from spark_stream_sched.runtime.engine.packing import (
    from_ipc,
    results_frame,
    unpack_frames,
    with_seq,
)
from spark_stream_sched.runtime.engine.sequence_order import (
    BEFORE_COL,
    seen_after,
    sequence_check,
)
from spark_stream_sched.runtime.engine.value_state import (
    OUT_OF_ORDER,
    ValueStateStore,
    ready_bound_from_watermark,
)
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps
from spark_stream_sched.spark.worker_errors import reported

__all__ = ["STATE_NAME", "STATE_SCHEMA", "OrderedProcessor", "from_ipc"]

log = logging.getLogger(__name__)

#: Name of the processor's one state variable (``stateVarName`` of the ``statestore`` reader).
STATE_NAME = "ordered"
#: Its schema: pending rows (Arrow IPC), operator snapshot, last ready bound used (ms), the
#: fingerprint of the query that wrote it (a changed definition is refused on restart), and
#: each input's largest event time so far (ms, the sequence check's; null: none yet).
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("operator", BinaryType()),
                           StructField("bound", LongType()),
                           StructField("fingerprint", StringType()),
                           StructField("seen", ArrayType(LongType()))])
class OrderedProcessor(StatefulProcessor):
    """Runs a query's per-group logic inside ``transformWithStateInPandas`` (see module doc).

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
    Built on the driver and pickled to the executors; ``init`` and the handlers run on
    executors, once per partition group, with the group as the implicit state key. The
    handlers report our own errors with our message on Spark's first line
    (:mod:`~spark_stream_sched.spark.worker_errors`).
    """

    def __init__(self, spec: QuerySpec, input_schema: pa.Schema, output_schema: pa.Schema,
                 sequence_column: str, ts_is_timestamp: bool) -> None:
        self.spec = spec
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.sequence_column = sequence_column
        self.ts_is_timestamp = ts_is_timestamp

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the group's state variable (runs on executors, and once on the driver)."""
        self._handle = handle
        self._state = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    @reported
    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802 - Spark API
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:  # noqa: N803
        """New rows of one partition group: buffer, release what is ready, emit (executors)."""
        new, orders = unpack_frames(rows, self._packed_schema())
        yield from self._step(int(key[0]), new, timerValues, orders)

    @reported
    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,  # noqa: N802, N803
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:  # noqa: N803
        """The watermark passed the group's timer: release and emit with no new rows."""
        yield from self._step(int(key[0]), None, timerValues)

    def close(self) -> None:
        """Nothing to release: state lives in Spark's state store."""

    # -- one step ----------------------------------------------------------------------------

    def _step(self, group: int, new: pa.Table | None, timer_values: TimerValues,
              orders: pa.Table | None = None) -> Iterator[pd.DataFrame]:
        watermark = timer_values.getCurrentWatermarkInMs()
        bound = ready_bound_from_watermark(watermark)
        store = ValueStateStore(self._state, self.spec, self._rows_schema(),
                                self.sequence_column)
        store.load(group)
        last_bound = store.bound
        store.bound = last_bound if bound is None else bound
        if new is not None and orders is not None:
            new = sequence_check(new, store.seen, orders, self.spec.timestamp_column,
                                 self.sequence_column, self.spec.out_of_order)
            store.seen = seen_after(store.seen, orders)
        rows = (with_seq(new, self.sequence_column) if new is not None
                else self._rows_schema().empty_table())
        batch = GroupedBatch(self.spec, self.input_schema, (group,),
                             late=OUT_OF_ORDER.replace("{column}", self.sequence_column))
        result = batch.run(rows, store, last_bound, bound)
        kept = result.states[group]
        self._keep_timer(watermark, not kept.is_empty)
        out = result.output
        if out.num_rows:
            out = bounds_as_timestamps(out) if self.ts_is_timestamp else out
            yield results_frame(out.select(self.output_schema.names))

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

    def _keep_timer(self, watermark: int, holds_state: bool) -> None:
        """One timer at ``watermark + 1`` while the group holds rows or open windows."""
        wanted = max(watermark, 0) + 1
        timers = list(self._handle.listTimers())
        for timer in timers:
            if timer > watermark and timer != wanted:  # expired ones Spark deletes itself
                self._handle.deleteTimer(timer)
        if holds_state and wanted not in timers:  # Spark warns about a timer registered twice
            self._handle.registerTimer(wanted)
