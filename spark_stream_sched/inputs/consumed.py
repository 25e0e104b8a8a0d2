"""Input files a cursor has read to the end: the query goes on after they are deleted.

A cursor stays in the file it last read (its ``row`` is then that file's row count) until a
later file gives it rows, so after a ``Trigger.AvailableNow`` run each input's cursor is in the
last file it read. The next run asked that file for its row count (to know whether rows were
left in it) before anything else: deleting the consumed files stopped it. Spark plans no batch
that starts before the offset it hands to ``latestOffset`` (the batch that ended there has run
and is committed) or before the start of a batch it replays, so a file such a cursor has read
to the end is needed by no batch. All the driver must know without the file is that it was read
to the end, i.e. how many rows it held. Before it returns an offset, the driver records, per
input, the file each cursor of the start and of the end has read to the end (no older offset
is ever handed back)::

    <stateLocation>/inputs/input-0000.ends.json  {"files": {"/data/in0/part-0007.parquet": 1200}}

A cursor is *past* its file (:meth:`ReadToEnd.settle`) when the file is missing and recorded
with the cursor's row: admission starts at the next file, and the batch's files leave it out
(:func:`batch_start` gives the readers the same start). A file that is still there is read and
checked as before (one that grew after its rows were consumed is still an error naming it); a
missing file with rows left to read, or never recorded, is still an error naming it. Called on
the driver (:class:`ReadToEnd`) and in every reader of a batch (:func:`batch_start`). No
pyspark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from spark_stream_sched.inputs.files import count_rows
from spark_stream_sched.inputs.manifest import MANIFEST_DIR
from spark_stream_sched.inputs.streams import Cursor
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.records import read_record, seal


def ends_path(location: str, input_id: int) -> str:
    """Path of input ``input_id``'s record of the files its cursors read to the end."""
    return os.path.join(location, MANIFEST_DIR, f"input-{input_id:04d}.ends.json")


def past(cursor: Cursor) -> Cursor:
    """``cursor`` placed before the first of the files that follow its file (same seq)."""
    return replace(cursor, file=None, row=0)


def moved_from(end: Cursor, start: Cursor) -> Cursor:
    """``end``, admitted from :func:`past` of ``start``; back in ``start``'s file if it stayed."""
    return replace(end, file=start.file, row=start.row) if end.file is None else end


def batch_start(cursor: Cursor, files: Sequence[str]) -> Cursor:
    """The start cursor a batch's reader uses with the batch's ``files`` of one input.

    The driver leaves a start cursor's file out of a batch's files only when the cursor is past
    it (:meth:`ReadToEnd.settle`); it refuses any other start whose file it does not know
    (:meth:`~spark_stream_sched.inputs.driver.SourceDriver.batch_files`).
    """
    return cursor if cursor.file is None or cursor.file in files else past(cursor)


class ReadToEnd:
    """The files one input's cursors read to the end, with their row counts (driver only)."""

    def __init__(self, location: str, input_id: int, fmt: str) -> None:
        self.path = ends_path(location, input_id)
        self.fmt = fmt
        self.rows: dict[str, int] = {}
        if os.path.exists(self.path):
            record = read_record(self.path, f"record of input {input_id}'s consumed files",
                                 "restore it, or start the query with a new checkpointLocation "
                                 "and stateLocation")
            self.rows = {str(f): int(n) for f, n in dict(record.get("files") or {}).items()}

    def settle(self, cursor: Cursor, files: Sequence[str]) -> tuple[Cursor, list[str]]:
        """The cursor and files to admit and read from: past a deleted file read to the end."""
        name = cursor.file
        if name is None or self.rows.get(name) != cursor.row or os.path.exists(name):
            return cursor, list(files)
        return past(cursor), [f for f in files if f > name]

    def remember(self, cursors: Sequence[Cursor]) -> None:
        """Record the files of ``cursors`` (the start's and the end's) they read to the end.

        Durable before the offset is returned; rewritten only when the set changes.
        """
        ends = {}
        for cursor in cursors:
            name = cursor.file
            if name is None:
                continue
            if self.rows.get(name) == cursor.row or (
                    os.path.exists(name) and count_rows(name, self.fmt) == cursor.row):
                ends[name] = cursor.row
        if ends != self.rows:
            atomic_write(self.path, seal({"files": ends}))
            self.rows = ends
