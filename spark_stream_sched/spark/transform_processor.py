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

Rows cross the Python boundary as pandas frames. Spark turns a nullable integer into float64
there, which is not exact above 2**53, so int64 and timestamp columns travel as decimal strings
(timestamps as microseconds) both ways and are decoded with Arrow casts (:class:`WireColumn`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from pyspark.sql import Column

log = logging.getLogger(__name__)

#: Name of the processor's one state variable (``stateVarName`` of the ``statestore`` reader).
STATE_NAME = "ordered"
#: Its schema: pending rows (Arrow IPC), operator snapshot, last ready bound used (ms), and
#: the fingerprint of the query that wrote it (a changed definition is refused on restart).
STATE_SCHEMA = StructType([StructField("pending", BinaryType()),
                           StructField("operator", BinaryType()),
                           StructField("bound", LongType()),
                           StructField("fingerprint", StringType())])
_MICROS = pa.timestamp("us", tz="UTC")


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


@dataclass(frozen=True)
class WireColumn:
    """One column as the runtime sees it (``type``) and as it crosses pandas (``encoded``)."""

    name: str
    type: pa.DataType

    @property
    def encoded(self) -> bool:
        """int64 and timestamps travel as decimal strings (timestamps in microseconds)."""
        return bool(pa.types.is_int64(self.type) or pa.types.is_timestamp(self.type))

    def decode(self, series: pd.Series) -> pa.Array:
        """The Arrow column of a pandas series that Spark produced from the wire form."""
        if not self.encoded:
            return pa.Array.from_pandas(series, type=self.type)
        values = pa.Array.from_pandas(series.astype(object), type=pa.string()).cast(pa.int64())
        return values.cast(_MICROS).cast(self.type) if pa.types.is_timestamp(self.type) else values

    def encode(self, column: pa.ChunkedArray) -> pd.Series:
        """The pandas series Spark turns into the wire form of this column."""
        if not self.encoded:
            return column.to_pandas()
        if pa.types.is_timestamp(self.type):
            column = column.cast(_MICROS).cast(pa.int64())
        return column.cast(pa.string()).to_pandas()

    def to_wire(self) -> Column:
        """Spark expression of this input column in its wire form (driver side)."""
        from pyspark.sql import functions as F  # noqa: N812

        if pa.types.is_timestamp(self.type):
            return F.unix_micros(F.col(self.name)).cast("string").alias(self.name)
        return F.col(self.name).cast("string").alias(self.name) if self.encoded else (
            F.col(self.name))

    def from_wire(self) -> Column:
        """Spark expression turning this result column back from its wire form."""
        from pyspark.sql import functions as F  # noqa: N812

        if pa.types.is_timestamp(self.type):
            return F.timestamp_micros(F.col(self.name).cast("long")).alias(self.name)
        return F.col(self.name).cast("long").alias(self.name) if self.encoded else (
            F.col(self.name))


def wire_struct(wire: Sequence[WireColumn]) -> StructType:
    """Spark schema of rows in wire form (the output type declared to Spark)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return StructType([StructField(c.name, StringType() if c.encoded else from_arrow_type(c.type))
                       for c in wire])


def decode_rows(frames: Iterable[pd.DataFrame], wire: Sequence[WireColumn]) -> pa.Table:
    """Data rows of Spark's frames as an Arrow table: ``wire`` columns, then ``__input``.

    A frame holds the ``wire`` columns, the input id and the end-of-input flag; flagged rows
    are markers, not data, and are dropped. Columns are taken by position (Spark may rename
    reserved-looking names in the frames).
    """
    tables = []
    for frame in frames:
        frame = frame[~frame.iloc[:, len(wire) + 1].astype(bool).to_numpy()]
        arrays = [c.decode(frame.iloc[:, i]) for i, c in enumerate(wire)]
        arrays.append(pa.Array.from_pandas(frame.iloc[:, len(wire)], type=pa.int32()))
        tables.append(pa.Table.from_arrays(arrays, names=[c.name for c in wire] + [INPUT_COL]))
    if not tables:
        return pa.schema([pa.field(c.name, c.type) for c in wire]).append(
            pa.field(INPUT_COL, pa.int32())).empty_table()
    return pa.concat_tables(tables)


def encode_rows(table: pa.Table, wire: Sequence[WireColumn]) -> pd.DataFrame:
    """Output rows as the pandas frame Spark converts to the wire output schema."""
    return pd.DataFrame({c.name: c.encode(table.column(c.name)) for c in wire})


def to_ipc(table: pa.Table) -> bytes:
    """Arrow IPC stream bytes of ``table`` (how pending rows are kept in the state store)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes) -> pa.Table:
    """The table :func:`to_ipc` wrote."""
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


class OrderedProcessor(StatefulProcessor):
    """Runs a query's per-group logic inside ``transformWithStateInPandas`` (see module doc).

    Parameters
    ----------
    spec:
        The query (windows and aggregates, or keyed operators).
    wire_in:
        The payload columns of the input rows, in the order Spark passes them.
    wire_out:
        The result columns, in the order of the declared output schema.
    sequence_column:
        The payload column whose ascending order is each input's order (``seq``).
    ts_is_timestamp:
        Window bounds are emitted as timestamps (else int64 milliseconds).

    Notes
    -----
    Built on the driver and pickled to the executors; ``init`` and the handlers run on
    executors, once per partition group, with the group as the implicit state key.
    """

    def __init__(self, spec: QuerySpec, wire_in: Sequence[WireColumn],
                 wire_out: Sequence[WireColumn], sequence_column: str,
                 ts_is_timestamp: bool) -> None:
        self.spec = spec
        self.wire_in = tuple(wire_in)
        self.wire_out = tuple(wire_out)
        self.sequence_column = sequence_column
        self.ts_is_timestamp = ts_is_timestamp
        self.input_schema = pa.schema([pa.field(c.name, c.type) for c in self.wire_in])

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Declare the group's state variable (runs on executors, and once on the driver)."""
        self._handle = handle
        self._state = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802 - Spark API
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:  # noqa: N803
        """New rows of one partition group: buffer, release what is ready, emit (executors)."""
        yield from self._step(decode_rows(rows, self.wire_in), timerValues)

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
        self._state.update((to_ipc(rest), operator.snapshot(), used, self.spec.fingerprint()))
        self._keep_timer(watermark, rest.num_rows > 0 or operator.state_bytes > 0)
        if out.num_rows:
            yield encode_rows(self._in_output_order(out, operator), self.wire_out)

    def _load(self) -> tuple[pa.Table, bytes | None, int | None]:
        """Pending rows, operator snapshot (None: fresh) and last bound of this group."""
        if not self._state.exists():
            empty = self.input_schema.append(pa.field(INPUT_COL, pa.int32())).empty_table()
            return empty, None, None
        value = self._state.get()
        assert value is not None
        pending, snapshot, bound, written_by = value
        if written_by != self.spec.fingerprint():
            raise StateError(
                f"ordered(): the state in this query's checkpoint was written by another query "
                f"definition (fingerprint {written_by}, this query {self.spec.fingerprint()}): "
                f"the window, keys, aggregates, operators, inputs or timestamp changed. Keeping "
                f"the state would mix two queries; restart with a new checkpointLocation")
        return from_ipc(bytes(pending)), bytes(snapshot), None if bound is None else int(bound)

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
        for timer in list(self._handle.listTimers()):
            if timer > watermark and timer != wanted:  # expired ones Spark deletes itself
                self._handle.deleteTimer(timer)
        if holds_state:
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
