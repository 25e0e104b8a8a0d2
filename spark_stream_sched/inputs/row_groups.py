"""Admission from Parquet row-group statistics: the driver reads footers, not timestamps.

With option ``splitRows=tasks`` the tasks read a batch's rows, check their order and split them,
so the driver needs of each input only where the batch ends and the greatest event time admitted
(the cursor's ``last_ts``, which the ready bound and the idle hold read). Parquet writers store
each row group's row count and the min/max of every column in the file's footer; from those the
driver admits **whole row groups**, earliest first, and never decodes a timestamp:

* a block is the unconsumed part of one row group: its rows and the group's max event time;
  an input's *reached* time after a block is the running max of the blocks' maxima from the
  cursor's ``last_ts`` on (so it never goes back, as with rows);
* blocks of all inputs are taken in the order of their reached time (ties: lower input id, then
  stream order) while the taken rows stay within the budget (``maxRecordsPerTrigger``); the
  first block that does not fit ends the batch, so every input's admitted blocks are a prefix of
  its stream and no input runs ahead of the others by more than one row group;
* the cursor's ``last_ts`` is the reached time of its last admitted block: the maximum of the
  admitted rows' event times, which is what reading them would give (under ``outOfOrder=drop``
  the kept rows' maximum is the running maximum; under ``fail`` a row out of order fails the
  batch's tasks with the same error, naming the same row, as the driver's read would).

It is the time-aligned admission of :func:`~spark_stream_sched.inputs.cursors.time_aligned_shares`
(Gulisano et al. (2016), §5.5) at the granularity of row groups. It answers None — the caller
then reads timestamps as before — for anything the statistics cannot vouch for: a format other
than Parquet, a row group without min/max of the timestamp column, a column type other than a
signed integer (milliseconds) or a timestamp stored as INT64, an event time outside the
supported range, or a budget smaller than the next row group. Pure Python + PyArrow.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.inputs.cursors import next_position
from spark_stream_sched.inputs.formats import canonical_format
from spark_stream_sched.inputs.listing import file_identity
from spark_stream_sched.inputs.naming import naming_input
from spark_stream_sched.inputs.streams import Cursor, InputStream
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX, EVENT_TIME_MIN

#: Parquet's time units (logical type ``Timestamp``; it has no seconds) to ms: floor divisors.
_DIVISORS = {"milliseconds": 1, "microseconds": 1_000, "nanoseconds": 1_000_000}


@dataclass(frozen=True)
class Admitted:
    """One input's admission: rows after the cursor and the greatest event time among them."""

    rows: int
    last_ts: int | None


def group_maxima(stream: InputStream, path: str,
                 ts_column: str) -> tuple[tuple[int, int], ...] | None:
    """``(rows, max event time in ms)`` of every row group of one file; None: not vouched for.

    The file's timestamp column must be of the kind of the input's schema (integer or
    timestamp). Cached by the file's identity ``(path, size, mtime_ns)`` (admitted
    files are immutable).
    """
    if canonical_format(stream.fmt) != "parquet":
        return None
    expected = None if stream.schema is None else _kind(stream.schema.field(ts_column).type)
    return _group_maxima(file_identity(path), ts_column, expected)


def _kind(kind: pa.DataType) -> str:
    """``integer``, ``timestamp`` or the type itself.

    The read path casts a file's column to the schema's type with ``safe=True``, so within one
    kind a value it reads is the value the statistics hold.
    """
    if pa.types.is_integer(kind):
        return "integer"
    return "timestamp" if pa.types.is_timestamp(kind) else str(kind)


@functools.lru_cache(maxsize=4096)
def _group_maxima(identity: tuple[str, int, int], ts_column: str, expected: str | None,
                  ) -> tuple[tuple[int, int], ...] | None:
    path, size, _ = identity
    if size == 0:
        return ()
    try:
        parquet = pq.ParquetFile(path)
        meta, arrow = parquet.metadata, parquet.schema_arrow  # Arrow's types as written
    except (pa.ArrowException, OSError):
        return None  # the read path reports an unreadable file with its name
    names = [meta.schema.column(k).path for k in range(meta.num_columns)]
    if ts_column not in names or arrow.get_field_index(ts_column) < 0 or (
            expected is not None and _kind(arrow.field(ts_column).type) != expected):
        return None
    k = names.index(ts_column)
    out = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        highest = _max_ms(group.column(k).statistics) if group.num_rows else None
        if group.num_rows and highest is None:
            return None
        out.append((group.num_rows, highest if highest is not None else 0))
    return tuple(out)


def _max_ms(stats: pq.Statistics | None) -> int | None:
    """The row group's greatest event time in ms; None when the statistics cannot vouch.

    Converted as the read path converts it (:func:`~spark_stream_sched.runtime.packets.\
event_times`: integers are ms, timestamps are floor-divided to ms), with plain integers: an
    Arrow array would make pyarrow import pandas (0.26 s of CPU) into a driver that otherwise
    never needs it.
    """
    if stats is None or not stats.has_min_max or stats.physical_type not in ("INT32", "INT64"):
        return None
    logical = json.loads(stats.logical_type.to_json())
    if logical.get("Type") == "None" or (logical.get("Type") == "Int" and logical.get("isSigned")):
        divisor = 1
    elif logical.get("Type") == "Timestamp" and logical.get("timeUnit") in _DIVISORS:
        divisor = _DIVISORS[logical["timeUnit"]]
    else:
        return None
    lowest, highest = int(stats.min_raw) // divisor, int(stats.max_raw) // divisor
    if lowest < EVENT_TIME_MIN or highest > EVENT_TIME_MAX:
        return None  # out of range: the read path names the row
    return highest


def _blocks(stream: InputStream, files: Sequence[str], cursor: Cursor, ts_column: str,
            cap: int) -> list[tuple[int, int]] | None:
    """``(rows, max ms)`` of the unconsumed row groups after ``cursor``, until ``cap`` rows."""
    with naming_input(stream):
        first, skip = next_position(files, cursor, stream.fmt)
    blocks: list[tuple[int, int]] = []
    total = 0
    for path in files[first:]:
        groups = group_maxima(stream, path, ts_column)
        if groups is None:
            return None
        for n, highest in groups:
            left = n - min(skip, n)
            skip -= n - left
            if left:
                blocks.append((left, highest))
                total += left
            if total >= cap:
                return blocks
    return blocks


def admit_row_groups(streams: Sequence[InputStream], files: Sequence[Sequence[str]],
                     cursors: Sequence[Cursor], budget: int | None, ts_column: str,
                     ) -> list[Admitted] | None:
    """Each input's admitted rows and ``last_ts`` by whole row groups (module docstring).

    ``cursors`` of finished inputs admit nothing. None when the statistics cannot vouch for
    every block the batch might take, or when not even one row group fits in ``budget``.
    """
    cap = budget if budget is not None else np.iinfo(np.int64).max
    ranked = []
    for j, (stream, cursor) in enumerate(zip(streams, cursors, strict=True)):
        if cursor.finished:
            continue
        blocks = _blocks(stream, files[j], cursor, ts_column, cap)
        if blocks is None:
            return None
        reached = cursor.last_ts
        for position, (n, highest) in enumerate(blocks):
            reached = highest if reached is None else max(reached, highest)
            ranked.append((reached, j, position, n))
    ranked.sort()
    admitted = [Admitted(0, cur.last_ts) for cur in cursors]
    taken = 0
    for reached, j, _, n in ranked:
        if taken + n > cap:
            break
        taken += n
        admitted[j] = Admitted(admitted[j].rows + n, reached)
    if taken == 0 and ranked:
        return None  # the next row group alone exceeds the budget: admit by rows
    return admitted
