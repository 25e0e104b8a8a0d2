"""How rows cross into and out of Spark's ``transformWithStateInPandas``: Arrow IPC per group.

pyspark 4.3 feeds ``transformWithStateInPandas`` row by row: its worker turns every input row
into a Python tuple (``itertuples``) to find the group boundaries and rebuilds pandas frames from
the tuples; pandas also turns a nullable ``long`` into ``float64`` (not exact above 2**53) and a
``double`` NaN into null. Measured on the 2 M-row benchmark (py-spy over two runs), that row
loop and the frame building were about half of the Python workers' time.

So :func:`spark_stream_sched.spark.ordered` does not hand the operator rows. A
``mapInArrow`` stage before it (:func:`pack`) cuts each Arrow batch of input rows by partition
group (the runtime's stable key hash) and sends each group's rows as one Arrow IPC stream in a
``binary`` column; the operator receives a few such rows per group and micro-batch. Its results
leave the same way (one blob per call, :func:`results_frame`) and a ``mapInArrow`` stage after
it (:func:`unpack`) turns them back into rows of the declared schema. Arrow IPC is exact for
every type: int64 above 2**53, nulls, NaN, timestamps.

Everything here is pure PyArrow (no pyspark import): the functions run inside Spark's Python
workers (``mapInArrow``) and are tested on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime.distribution.groups import group_of_rows, split_by_group
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

#: Columns of the packed rows: the partition group and its rows (Arrow IPC stream bytes).
GROUP, ROWS = "_sss_group", "_sss_rows"
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
         n_groups: int, input_column: str, end_column: str) -> Iterator[pa.RecordBatch]:
    """Per input batch, one ``(rows, group)`` row per partition group it has rows of.

    ``batches`` hold the ``payload`` columns, the input id and the end-of-input flag (by name).
    Rows flagged as end of input are markers, not data, and are dropped here (after Spark's
    watermark saw them). ``rows`` holds the group's rows as ``payload`` + ``__input`` (int32),
    in their order within the batch.
    """
    names = payload.names
    for batch in batches:
        if batch.num_rows == 0:
            continue
        data = batch.filter(pc.invert(batch.column(end_column))) if (
            batch.column(end_column).true_count) else batch
        if data.num_rows == 0:
            continue
        rows = pa.Table.from_arrays(
            [data.column(n).cast(payload.field(n).type) for n in names]
            + [data.column(input_column).cast(pa.int32())], names=[*names, INPUT_COL])
        parts = split_by_group(rows, group_of_rows(rows, keys, n_groups))
        yield pa.RecordBatch.from_arrays(
            [pa.array([to_ipc(t) for _, t in parts], pa.binary()),
             pa.array([g for g, _ in parts], pa.int32())], names=[ROWS, GROUP])


def unpack_frames(frames: Iterable[pd.DataFrame], schema: pa.Schema) -> pa.Table:
    """The rows of one group's packed frames (the operator's input) as one table of ``schema``.

    The blobs are the frames' first column (Spark may add the grouping column after it).
    """
    tables = [from_ipc(blob) for frame in frames for blob in frame.iloc[:, 0]]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def results_frame(table: pa.Table) -> pd.DataFrame:
    """One call's results as the one-row frame the operator returns to Spark."""
    return pd.DataFrame({RESULTS: [to_ipc(table)]})


def unpack(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The result rows of the operator's blobs, as batches of ``schema`` (Spark's types)."""
    for batch in batches:
        for blob in batch.column(0):
            if blob.is_valid:
                yield from from_ipc(blob.as_buffer()).cast(schema).to_batches()
