"""The stateful processor behind :func:`~spark_stream_sched.spark.transform.ordered`.

Spark's ``transformWithStateInPandas`` calls :class:`OrderedProcessor` once per partition group
that has new rows or an expired timer in a micro-batch. Each call is one run of the engine's
batch entry (:class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`) over that one
group, with the group's state in Spark's state store (RocksDB) through
:class:`ValueStateStore`, the :class:`~spark_stream_sched.runtime.state.store.GroupStore` over
the processor's one value: the rows not ready yet as Arrow IPC bytes, the group operator's
snapshot, the ready bound it last used, each input's largest event time so far (the sequence
check's memory, the same in every group) and the query's fingerprint. Spark versions, commits and
prunes that value with its checkpoint. Each call:

1. turns the watermark into the ready bound ``R`` (:func:`ready_bound_from_watermark`);
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
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
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

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.engine.batch import GroupedBatch
from spark_stream_sched.runtime.engine.packing import (
    from_ipc,
    pending_from_ipc,
    pending_to_ipc,
    results_frame,
    unpack_frames,
    with_seq,
)
from spark_stream_sched.runtime.engine.sequence_order import (
    BEFORE_COL,
    NOTHING_SEEN,
    seen_after,
    sequence_check,
)
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX, INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.state.store import GroupState
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps
from spark_stream_sched.spark.worker_errors import reported

__all__ = ["STATE_NAME", "STATE_SCHEMA", "OrderedProcessor", "ValueStateStore", "from_ipc",
           "ready_bound_from_watermark"]

log = logging.getLogger(__name__)

#: Name of the processor's one state variable (``stateVarName`` of the ``statestore`` reader).
STATE_NAME = "ordered"
#: Compression of the pending rows in the state value. pyspark 4.3's state client moves a
#: value between the JVM and Python as a pickle, and the JVM pickles ``binary`` byte by byte:
#: measured on the 2 M-row benchmark, 43 MB of pending rows per micro-batch made that one of
#: the largest JVM costs. LZ4 cut them about 3x for ~10 ms of CPU per group and batch (zstd:
#: 5.6x but 30 ms).
PENDING_COMPRESSION = "lz4"
#: Its schema: pending rows (Arrow IPC), operator snapshot, last ready bound used (ms), the
#: fingerprint of the query that wrote it (a changed definition is refused on restart), and
#: each input's largest event time so far (ms, the sequence check's; null: none yet).
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("operator", BinaryType()),
                           StructField("bound", LongType()),
                           StructField("fingerprint", StringType()),
                           StructField("seen", ArrayType(LongType()))])
#: The error for a row below the bound a group already released (fields: GroupedBatch.late).
OUT_OF_ORDER = ("input {input} is out of order at {column}={position!r}: ts {ts} is below the "
                "ready bound {bound} already released, so an earlier row of that input had a "
                "higher ts; sort the input by event time or use out_of_order='drop'")


def ready_bound_from_watermark(watermark_ms: int) -> int | None:
    """``R`` from Spark's global watermark ``W`` (every input watermarked with 1 ms delay).

    ``W = min_j latest_j - 1``, so ``R = W + 1``. ``W <= 0`` is Spark's initial value (some
    input has sent nothing, or every event time is at or before the epoch): nothing is ready.
    ``R >= EVENT_TIME_MAX`` only happens when every input sent its end-of-input marker:
    everything is ready (:data:`~spark_stream_sched.runtime.packets.TS_MAX`).
    """
    if watermark_ms <= 0:
        return None
    if watermark_ms + 1 >= EVENT_TIME_MAX:
        return TS_MAX
    return watermark_ms + 1


class ValueStateStore:
    """The :class:`~spark_stream_sched.runtime.state.store.GroupStore` over Spark's state store.

    One value per partition group (the processor's grouping key, so ``group`` is implicit):
    ``load`` reads it (None: a fresh group) and checks that this query wrote it; ``save`` writes
    the group's new state with ``bound`` (the ready bound the batch used), or clears the value
    when the group holds nothing. Spark commits, versions and prunes it with the checkpoint.

    ``rows_schema``: the pending rows in memory (payload, ``__input``, ``__seq``); they are
    stored without ``__seq`` and get it back from ``sequence_column`` on load
    (:func:`~spark_stream_sched.runtime.engine.packing.pending_to_ipc`). :attr:`seen` is each
    input's largest event time so far (``NOTHING_SEEN``: none), kept even when the group holds
    no rows.
    """

    def __init__(self, state: Any, spec: QuerySpec, rows_schema: pa.Schema,
                 sequence_column: str) -> None:
        self._state, self._spec, self._rows_schema = state, spec, rows_schema
        self._sequence_column = sequence_column
        self._loaded: GroupState | None = None
        self.bound: int | None = None
        self.seen = np.full(spec.n_inputs, NOTHING_SEEN, np.int64)

    def load(self, group: int) -> GroupState:
        """The group's state (read once); also sets :attr:`bound` to the bound it last used."""
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def _read(self) -> GroupState:
        if not self._state.exists():
            return GroupState()
        value = self._state.get()
        assert value is not None
        pending, snapshot, bound, written_by, seen = value
        if written_by != self._spec.fingerprint():
            raise StateError(
                f"ordered(): the state in this query's checkpoint was written by another query "
                f"definition (fingerprint {written_by}, this query {self._spec.fingerprint()}): "
                f"the window, keys, aggregates, operators, inputs or timestamp changed. Keeping "
                f"the state would mix two queries; restart with a new checkpointLocation")
        rows = pending_from_ipc(bytes(pending), self._sequence_column)
        if _columns(rows.schema) != _columns(self._rows_schema):
            raise StateError(
                f"ordered(): the pending rows in this query's checkpoint have the columns "
                f"{rows.schema.names}, this query keeps {self._rows_schema.names}: the state "
                f"was written by another definition or release; restart with a new "
                f"checkpointLocation")
        self.bound = None if bound is None else int(bound)
        if seen is not None:
            self.seen = np.array([NOTHING_SEEN if v is None else v for v in seen], np.int64)
        return GroupState(rows, bytes(snapshot))

    def save(self, states: Mapping[int, GroupState]) -> None:
        """Write the group's state (clear the value when it is empty)."""
        (state,) = states.values()
        nothing_seen = bool((self.seen == NOTHING_SEEN).all())
        if state.is_empty and nothing_seen:
            self._state.clear()
            return
        pending = state.pending if state.pending is not None else self._rows_schema.empty_table()
        seen = None if nothing_seen else [None if v == NOTHING_SEEN else int(v)
                                          for v in self.seen]
        self._state.update((pending_to_ipc(pending, PENDING_COMPRESSION), state.window,
                            self.bound, self._spec.fingerprint(), seen))


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
        if new is not None:
            new = sequence_check(new, store.seen, self.spec.timestamp_column,
                                 self.sequence_column, self.spec.out_of_order)
        if orders is not None:
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


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """Names and types (nullability differs between Spark's schema and Arrow IPC's)."""
    return [(f.name, f.type) for f in schema]
