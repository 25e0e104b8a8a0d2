"""How rows cross into and out of Spark's ``transformWithStateInPandas``: Arrow IPC per group.

pyspark 4.3 feeds ``transformWithStateInPandas`` row by row: its worker turns every input row
into a Python tuple (``itertuples``) to find the group boundaries and rebuilds pandas frames from
the tuples; pandas also turns a nullable ``long`` into ``float64`` (not exact above 2**53) and a
``double`` NaN into null. Measured on the 2 M-row benchmark (py-spy over two runs), that row
loop and the frame building were about half of the Python workers' time.

So :func:`spark_stream_sched.spark.ordered` does not hand the operator rows. A
``mapInArrow`` stage before it (:func:`pack`) takes one input's rows of a micro-batch (each input
is one Spark partition there), marks each row with the largest event time before it along the
sequence (:mod:`~.sequence_order`), cuts them by partition group (the runtime's stable key hash)
and sends each group's rows as one Arrow IPC stream in a ``binary`` column, and the input's
order summary to every group; the operator receives a few such rows per group and micro-batch.
Its results leave the same way (one blob per call, :func:`results_frame`) and a ``mapInArrow``
stage after it (:func:`unpack`) turns them back into rows of the declared schema. Arrow IPC is
exact for every type: int64 above 2**53, nulls, NaN, timestamps.

Everything here is pure PyArrow (no pyspark import): the functions run inside Spark's Python
workers (``mapInArrow``) and are tested on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime.distribution.groups import group_of_rows, split_by_group
from spark_stream_sched.runtime.engine.sequence_order import (
    SUMMARY_SCHEMA,
    order_marks,
    summaries_table,
    with_ends,
)
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

#: Columns of the packed rows: the partition group, its rows (Arrow IPC stream bytes) or an
#: input's order summary for the batch (:mod:`~.sequence_order`; every group gets each one).
GROUP, ROWS, ORDER = "_sss_group", "_sss_rows", "_sss_order"
#: Column of the operator's output rows: one Arrow IPC stream of results per call.
RESULTS = "_sss_results"


def to_ipc(table: pa.Table, compression: str | None = None) -> bytes:
    """Arrow IPC stream bytes of ``table`` (buffers compressed with ``lz4`` or ``zstd``)."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes | pa.Buffer) -> pa.Table:
    """The table :func:`to_ipc` wrote (compressed or not: the stream says)."""
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


def with_seq(rows: pa.Table, sequence_column: str) -> pa.Table:
    """Rows with ``__seq``: each row's position, its sequence column's value.

    An integer column is taken as int64; any other sortable type (e.g. ``file#row`` text) as it
    is -- the merge sorts positions of either kind.
    """
    column = rows.column(sequence_column)
    if pa.types.is_integer(column.type):
        column = pc.cast(column, pa.int64())
    return rows.append_column(SEQ_COL, column)


def pending_to_ipc(rows: pa.Table, compression: str | None) -> bytes:
    """A group's pending rows as stored: Arrow IPC without ``__seq``.

    :func:`with_seq` of the sequence column restores it (a ``file#row`` text position would
    otherwise be stored twice).
    """
    return to_ipc(rows.drop_columns([SEQ_COL]), compression)


def pending_from_ipc(data: bytes | pa.Buffer, sequence_column: str) -> pa.Table:
    """The rows :func:`pending_to_ipc` stored, with ``__seq`` again.

    Rows stored with ``__seq`` (the layout before 2026-11-26) are read too.
    """
    rows = from_ipc(data)
    if SEQ_COL in rows.schema.names:
        rows = rows.drop_columns([SEQ_COL])
    return with_seq(rows, sequence_column)


def pack(batches: Iterable[pa.RecordBatch], payload: pa.Schema, keys: Sequence[str],
         n_groups: int, input_column: str, end_column: str, timestamp: str,
         sequence: str) -> Iterator[pa.RecordBatch]:
    """One Spark partition of input rows as ``(rows, order, group)`` rows (module doc).

    ``batches`` hold the ``payload`` columns, the input id and the end-of-input flag (by name),
    and *every* row of the micro-batch of each input they hold rows of. Rows flagged as end of
    input are markers, not data, and are dropped here (after Spark's watermark saw them).
    ``rows`` holds a group's rows as ``payload`` + ``__input`` (int32) + ``__before`` (the
    largest earlier event time of their input along ``sequence``), in their order;
    ``order``, sent to each of the ``n_groups`` groups, the partition's per-input summaries
    (with each input whose end-of-input marker it held, :func:`~.sequence_order.with_ends`).
    """
    names = payload.names
    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    batch = pa.concat_tables(tables)
    ends = batch.column(end_column)
    ended = set(pc.unique(batch.filter(ends).column(input_column)).to_pylist())
    data = batch.filter(pc.invert(ends)) if ended else batch
    rows = pa.Table.from_arrays(
        [data.column(n).cast(payload.field(n).type) for n in names]
        + [data.column(input_column).cast(pa.int32())], names=[*names, INPUT_COL])
    marked, summaries = order_marks(rows, timestamp, sequence)
    summaries = with_ends(summaries, ended)
    parts = split_by_group(marked, group_of_rows(marked, keys, n_groups)) if rows.num_rows else []
    order = to_ipc(summaries_table(summaries))
    blobs = [to_ipc(t) for _, t in parts]
    yield pa.RecordBatch.from_arrays(
        [pa.array(blobs + [None] * n_groups, pa.binary()),
         pa.array([None] * len(parts) + [order] * n_groups, pa.binary()),
         pa.array([g for g, _ in parts] + list(range(n_groups)), pa.int32())],
        names=[ROWS, ORDER, GROUP])


def unpack_frames(frames: Iterable[pd.DataFrame], schema: pa.Schema
                  ) -> tuple[pa.Table, pa.Table]:
    """One group's packed frames (the operator's input): its rows (``schema``) and summaries.

    The frames' first two columns are :data:`ROWS` and :data:`ORDER`, in :func:`pack`'s order
    (Spark does not keep their names in the frames; it may add the grouping column after them).
    """
    blobs = [(rows, order) for frame in frames
             for rows, order in zip(frame.iloc[:, 0], frame.iloc[:, 1], strict=True)]
    tables = [from_ipc(b) for b, _ in blobs if _present(b)]
    orders = [from_ipc(o) for _, o in blobs if _present(o)]
    return (pa.concat_tables(tables) if tables else schema.empty_table(),
            pa.concat_tables(orders) if orders else SUMMARY_SCHEMA.empty_table())


def _present(blob: object) -> bool:
    """A blob of a nullable binary column in a pandas frame: bytes, or None/NaN for null."""
    return isinstance(blob, bytes | bytearray | memoryview)


def results_frame(table: pa.Table) -> pd.DataFrame:
    """One call's results as the one-row frame the operator returns to Spark."""
    return pd.DataFrame({RESULTS: [to_ipc(table)]})


def unpack(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The result rows of the operator's blobs, as batches of ``schema`` (Spark's types)."""
    for batch in batches:
        for blob in batch.column(0):
            if blob.is_valid:
                yield from from_ipc(blob.as_buffer()).cast(schema).to_batches()
