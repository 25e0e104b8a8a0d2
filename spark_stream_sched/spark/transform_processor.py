"""The stateful processor behind :func:`~spark_stream_sched.spark.transform.ordered`.

Spark's ``transformWithStateInPandas`` calls :class:`OrderedProcessor` once per partition group
that has new rows or an expired timer in a micro-batch. Per group it keeps one value in Spark's
state store (RocksDB): the rows not ready yet as Arrow IPC bytes, the group operator's snapshot
(the same :class:`~spark_stream_sched.runtime.state.versions.GroupState` pair the ``ordered-agg``
source keeps) and the ready bound it last used. Each call:

1. turns the watermark into the ready bound ``R`` (:func:`ready_bound_from_watermark`);
2. appends the new rows to the pending ones and releases those with ``ts < R`` in the total
   order ``(ts, input, seq)`` (:func:`~spark_stream_sched.runtime.merge.release_ready`);
3. feeds them to the group operator (windows or a keyed pipeline), which emits what ``R`` closed;
4. saves the state and keeps one event-time timer at ``watermark + 1`` while the group holds
   anything, so the group runs again in the first batch whose watermark is higher, with or
   without new rows.

Rows cross the Python boundary packed: each group's rows of an input batch as one Arrow IPC
stream, and each call's results as one (:mod:`~spark_stream_sched.spark.transform_wire`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.merge import release_ready
from spark_stream_sched.runtime.packets import (
    EVENT_TIME_MAX,
    INPUT_COL,
    SEQ_COL,
    TS_MAX,
    event_times,
)
from spark_stream_sched.runtime.query.ordered import GroupOperator
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.window.aggregator import (
    WINDOW_END,
    WINDOW_START,
    bounds_as_timestamps,
)
from spark_stream_sched.spark.transform_wire import (
    from_ipc,
    results_frame,
    to_ipc,
    unpack_frames,
)

__all__ = ["STATE_NAME", "STATE_SCHEMA", "OrderedProcessor", "from_ipc",
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
#: Its schema: pending rows (Arrow IPC), operator snapshot, last ready bound used (ms), and
#: the fingerprint of the query that wrote it (a changed definition is refused on restart).
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("operator", BinaryType()),
                           StructField("bound", LongType()),
                           StructField("fingerprint", StringType())])


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
    executors, once per partition group, with the group as the implicit state key.
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

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802 - Spark API
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:  # noqa: N803
        """New rows of one partition group: buffer, release what is ready, emit (executors)."""
        yield from self._step(unpack_frames(rows, self._rows_schema()), timerValues)

    def handleExpiredTimer(self, key: Any, timerValues: TimerValues,  # noqa: N802, N803
                           expiredTimerInfo: ExpiredTimerInfo) -> Iterator[pd.DataFrame]:  # noqa: N803
        """The watermark passed the group's timer: release and emit with no new rows."""
        yield from self._step(None, timerValues)

    def close(self) -> None:
        """Nothing to release: state lives in Spark's state store."""

    # -- one step ----------------------------------------------------------------------------

    def _step(self, new: pa.Table | None, timer_values: TimerValues) -> Iterator[pd.DataFrame]:
        watermark = timer_values.getCurrentWatermarkInMs()
        bound = ready_bound_from_watermark(watermark)
        pending, snapshot, last_bound = self._load()
        rows = pending if new is None or new.num_rows == 0 else self._append(pending, new,
                                                                           last_bound)
        released, rest = release_ready(self._with_seq(rows), bound, self.spec.timestamp_column)
        operator = self.spec.build_group(self.input_schema, snapshot)
        out = operator.update(released, bound)
        rest = rest.drop_columns([SEQ_COL])
        used = last_bound if bound is None else bound
        self._state.update((to_ipc(rest, PENDING_COMPRESSION), operator.snapshot(), used,
                            self.spec.fingerprint()))
        self._keep_timer(watermark, rest.num_rows > 0 or operator.state_bytes > 0)
        if out.num_rows:
            yield results_frame(self._in_output_order(out, operator).select(
                self.output_schema.names))

    def _load(self) -> tuple[pa.Table, bytes | None, int | None]:
        """Pending rows, operator snapshot (None: fresh) and last bound of this group."""
        if not self._state.exists():
            return self._rows_schema().empty_table(), None, None
        value = self._state.get()
        assert value is not None
        pending, snapshot, bound, written_by = value
        if written_by != self.spec.fingerprint():
            raise StateError(
                f"ordered(): the state in this query's checkpoint was written by another query "
                f"definition (fingerprint {written_by}, this query {self.spec.fingerprint()}): "
                f"the window, keys, aggregates, operators, inputs or timestamp changed. Keeping "
                f"the state would mix two queries; restart with a new checkpointLocation")
        rows = from_ipc(bytes(pending))
        if rows.schema != self._rows_schema():
            raise StateError(
                f"ordered(): the pending rows in this query's checkpoint have the columns "
                f"{rows.schema.names}, this query reads {self._rows_schema().names}: the state "
                f"was written by another definition or release; restart with a new "
                f"checkpointLocation")
        return rows, bytes(snapshot), None if bound is None else int(bound)

    def _rows_schema(self) -> pa.Schema:
        """Schema of the rows the operator buffers: the payload and ``__input``."""
        return self.input_schema.append(pa.field(INPUT_COL, pa.int32()))

    def _append(self, pending: pa.Table, new: pa.Table, last_bound: int | None) -> pa.Table:
        """Pending + new rows; rows below the bound already released break the input order."""
        if last_bound is not None:
            ts = event_times(new, self.spec.timestamp_column, "new rows")
            late = ts < last_bound
            if late.any():
                first = int(np.flatnonzero(late)[0])
                seq = new.column(self.sequence_column)[first].as_py()
                if self.spec.out_of_order == "fail":
                    raise InputError(
                        f"input {new.column(INPUT_COL)[first].as_py()} is out of order at "
                        f"{self.sequence_column}={seq!r}: ts {int(ts[first])} is below the ready "
                        f"bound {last_bound} already released, so an earlier row of that input "
                        f"had a higher ts; sort the input by event time or use out_of_order='drop'")
                log.warning("dropped %d rows below ready bound %d (out_of_order='drop')",
                            int(late.sum()), last_bound)
                new = new.filter(pa.array(~late))
        return pa.concat_tables([pending, new.cast(pending.schema)])

    def _with_seq(self, rows: pa.Table) -> pa.Table:
        """Rows with ``__seq``: the integer sequence column, or the dense rank of another one.

        A rank is exact for windows: only the relative order of rows released together
        matters there (released batches follow each other in the total order). Keyed operators
        may keep ``__seq`` in state, so the driver requires an integer column for them.
        """
        column = rows.column(self.sequence_column)
        if pa.types.is_integer(column.type):
            return rows.append_column(SEQ_COL, pc.cast(column, pa.int64()))
        rank = pc.rank(column, sort_keys="ascending", tiebreaker="dense") if len(rows) else (
            pa.array([], pa.uint64()))
        return rows.append_column(SEQ_COL, pc.cast(rank, pa.int64()))

    def _keep_timer(self, watermark: int, holds_state: bool) -> None:
        """One timer at ``watermark + 1`` while the group holds rows or open windows."""
        wanted = max(watermark, 0) + 1
        timers = list(self._handle.listTimers())
        for timer in timers:
            if timer > watermark and timer != wanted:  # expired ones Spark deletes itself
                self._handle.deleteTimer(timer)
        if holds_state and wanted not in timers:  # Spark warns about a timer registered twice
            self._handle.registerTimer(wanted)

    def _in_output_order(self, out: pa.Table, operator: GroupOperator) -> pa.Table:
        """Rows in the operator's output order, bounds in the output's time type.

        Windows by ``(window_end, window_start, keys)``; a pipeline's order (sessions by end,
        rows in the total order of their tuples) without ``__input``/``__seq``.
        """
        if isinstance(operator, Pipeline):
            out = operator.public(operator.in_order(out))
        else:
            names = [WINDOW_END, WINDOW_START, *self.spec.key_columns]
            out = out.take(pc.sort_indices(out, sort_keys=[(n, "ascending") for n in names]))
        return bounds_as_timestamps(out) if self.ts_is_timestamp else out
