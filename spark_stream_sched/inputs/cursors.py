"""Cursors over input streams: where each input stands, what to admit next, the rows between.

Contract of an input stream (documented for users in ``options/source.py``):

* an input's files and their order come from the one listing rule (``inputs/listing.py``);
* files are immutable once visible (write elsewhere and rename into place); a file that appears
  later must sort after the last file admitted from that input, otherwise it is *late* — it
  would belong to the past of the stream — and is reported (or, with ``lateFiles=skip``,
  recorded and counted) by the input's manifest (``inputs/manifest.py``), never read or ignored
  in silence. The Spark source walks its cursors over the manifest's files, not over a fresh
  listing, so a replayed batch reads exactly the files it planned;
* rows of one input are in non-decreasing event time across the files in that order; a file
  with no rows (an empty file, in any format) is stepped over.

A :class:`Cursor` names the file it is in and how many of its rows were consumed;
:func:`time_aligned_shares` splits a row budget over inputs (the earliest rows first),
:func:`advance` moves one cursor and :func:`read_between` returns exactly the rows between two
cursors; :class:`EventTimeCache` keeps the timestamps the driver has peeked at across batches.

Pure Python + PyArrow (no pyspark), so the Spark source's offset logic is testable without a JVM.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError, OutOfOrderError
from spark_stream_sched.inputs.files import count_rows, read_file_rows
from spark_stream_sched.inputs.listing import file_identity
from spark_stream_sched.inputs.naming import locate, naming_input
from spark_stream_sched.inputs.streams import Cursor, InputStream
from spark_stream_sched.runtime.merge import in_order_mask
from spark_stream_sched.runtime.packets import event_times

log = logging.getLogger(__name__)


def next_position(files: Sequence[str], cursor: Cursor, fmt: str) -> tuple[int, int]:
    """(file index, row) of the next unconsumed row; ``(len(files), 0)`` when none is listed.

    Raises :class:`InputError` when the cursor's file is no longer listed.
    """
    if cursor.file is None:
        return 0, 0
    idx = bisect.bisect_left(files, cursor.file)
    if idx == len(files) or files[idx] != cursor.file:
        raise InputError(f"file {cursor.file!r} of the checkpointed cursor is no longer listed; "
                         f"files of an input must not be removed or renamed while the query "
                         f"runs")
    if cursor.row < count_rows(files[idx], fmt):
        return idx, cursor.row
    return idx + 1, 0


def available_rows(files: list[str], cursor: Cursor, fmt: str, cap: int | None,
                   stream: InputStream | None = None) -> int:
    """Unconsumed rows after ``cursor`` (counting stops early once ``cap`` is reached).

    ``stream``, when given, is named in errors (:func:`naming_input`).
    """
    with naming_input(stream):
        return _available_rows(files, cursor, fmt, cap)


def _available_rows(files: list[str], cursor: Cursor, fmt: str, cap: int | None) -> int:
    idx, row = next_position(files, cursor, fmt)
    total = 0
    for i in range(idx, len(files)):
        total += count_rows(files[i], fmt) - (row if i == idx else 0)
        if cap is not None and total >= cap:
            return cap
    return total


def _walk(files: list[str], cursor: Cursor, fmt: str,
          n_rows: int) -> list[tuple[str, int, int]]:
    """The ``(file, start, stop)`` row ranges of the next ``n_rows`` rows after ``cursor``."""
    idx, row = next_position(files, cursor, fmt)
    ranges, left = [], n_rows
    while left > 0:
        if idx >= len(files):
            raise InputError(f"input ends before {n_rows} rows after cursor {cursor}; a file "
                             f"was truncated or removed")
        n = count_rows(files[idx], fmt)
        take = min(left, n - row)
        if take > 0:
            ranges.append((files[idx], row, row + take))
        left -= take
        idx, row = idx + 1, 0
    return ranges


def read_between(stream: InputStream, files: list[str], start: Cursor, end: Cursor,
                 ts_column: str, policy: str,
                 warn: bool = False) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Rows of ``stream`` between two cursors, with their event times and seq numbers.

    Returns ``(rows, ts, seq)``: rows out of order are already dropped (policy ``drop``) or
    raise :class:`OutOfOrderError` (policy ``fail``); ``seq`` counts dropped rows too.
    ``warn``: log the dropped rows (the reader that is the first to see them: the tasks of
    ``splitRows=tasks``, whose driver reads no row; :func:`advance` logs them otherwise).
    """
    with naming_input(stream):
        return _read_between(stream, files, start, end, ts_column, policy, warn)


def _read_between(stream: InputStream, files: list[str], start: Cursor, end: Cursor,
                  ts_column: str, policy: str,
                  warn: bool) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    n_rows = end.seq - start.seq
    ranges = _walk(files, start, stream.fmt, n_rows)
    parts = [read_file_rows(f, stream.fmt, stream.schema, a, b) for f, a, b in ranges]
    empty = stream.schema.empty_table() if stream.schema is not None else pa.table({})
    rows = pa.concat_tables(parts) if parts else empty
    if rows.num_rows != n_rows:
        raise InputError(f"input {stream.input_id}: read {rows.num_rows} rows between seq "
                         f"{start.seq} and {end.seq}, expected {n_rows}; files changed")
    # Event times per file, so that a bad one is reported with its file and row in that file.
    ts = np.concatenate([np.zeros(0, np.int64)] + [
        event_times(part, ts_column, f"input {stream.input_id} file {f!r}", first_row=a)
        for part, (f, a, _) in zip(parts, ranges, strict=True)])
    seq = np.arange(start.seq, end.seq, dtype=np.int64)
    try:
        keep = in_order_mask(ts, start.last_ts, policy, stream.input_id, start.seq)
    except OutOfOrderError as exc:
        raise locate(exc, stream, files, start) from None
    if keep is not None:
        if warn:
            _warn_dropped(stream, int((~keep).sum()), start.seq, n_rows)
        rows, ts, seq = rows.filter(pa.array(keep)), ts[keep], seq[keep]
    return rows, ts, seq


def _warn_dropped(stream: InputStream, dropped: int, seq: int, n_rows: int) -> None:
    log.warning("input %d: dropped %d out-of-order rows among positions %d..%d "
                "(outOfOrder=drop)", stream.input_id, dropped, seq, seq + n_rows - 1)


class EventTimeCache:
    """Event times of whole input files, kept by the driver's long-lived reader across batches.

    ``latestOffset`` ranks the next rows of every input by event time each micro-batch; without
    a cache it reads the timestamps of up to ``maxRecordsPerTrigger`` rows of every input and
    reads most of them again in the next batch. The cache reads a file's timestamp column once
    and keeps it, keyed by the file's identity ``(path, size, mtime_ns)`` (files are immutable
    once admitted; a changed file gets a new key and is read again).

    Called on the driver only. A new reader (a restart) starts with an empty cache, so nothing
    survives that could disagree with the files. Files before every cursor are dropped by
    :meth:`forget_before`; at most ``max_values`` timestamps are kept (a larger file is read by
    range each time, uncached).
    """

    def __init__(self, max_values: int = 16_000_000) -> None:
        self.max_values = max_values
        self._times: dict[tuple[str, int, int], np.ndarray] = {}
        self.reads = 0  # files whose timestamp column was read (for tests and metrics)

    def file_times(self, stream: InputStream, path: str, ts_column: str) -> np.ndarray | None:
        """Event times of every row of ``path`` (None when the file is too large to keep)."""
        identity = file_identity(path)
        hit = self._times.get(identity)
        if hit is not None:
            return hit
        if count_rows(path, stream.fmt) > self.max_values:
            return None
        times = _read_times(stream, path, ts_column, 0, None)
        self.reads += 1
        while self._times and sum(len(t) for t in self._times.values()) + len(
                times) > self.max_values:
            self._times.pop(next(iter(self._times)))  # oldest first
        self._times[identity] = times
        return times

    def forget_before(self, files: Sequence[str], cursor: Cursor) -> None:
        """Drop the files of ``files`` that sort before the cursor's file (consumed for good)."""
        if cursor.file is None:
            return
        consumed = {f for f in files if f < cursor.file}
        for key in [k for k in self._times if k[0] in consumed]:
            del self._times[key]


def _read_times(stream: InputStream, path: str, ts_column: str, start: int,
                stop: int | None) -> np.ndarray:
    """Event times (int64 ms) of rows ``[start, stop)`` of one file; reads one column."""
    ts_schema = None
    if stream.schema is not None:
        ts_schema = pa.schema([stream.schema.field(ts_column)])
    return event_times(read_file_rows(path, stream.fmt, ts_schema, start, stop), ts_column,
                       f"input {stream.input_id} file {path!r}", first_row=start)


def peek_event_times(stream: InputStream, files: list[str], start: Cursor, n_rows: int,
                     ts_column: str, cache: EventTimeCache | None = None) -> np.ndarray:
    """Event times (int64 ms) of the next ``n_rows`` rows after ``start``; reads one column.

    With ``cache`` (the driver's :class:`EventTimeCache`) each file's timestamps are read once
    over the life of the reader instead of once per micro-batch.
    """
    if n_rows <= 0:
        return np.zeros(0, np.int64)
    parts = []
    with naming_input(stream):
        for f, a, b in _walk(files, start, stream.fmt, n_rows):
            whole = cache.file_times(stream, f, ts_column) if cache is not None else None
            parts.append(whole[a:b] if whole is not None
                         else _read_times(stream, f, ts_column, a, b))
    return np.concatenate(parts)


def time_aligned_shares(heads: Sequence[np.ndarray], last_ts: Sequence[int | None],
                        budget: int | None) -> list[int]:
    """Rows to admit per input: the ``budget`` earliest upcoming rows over all inputs.

    ``heads[j]`` holds the event times of input ``j``'s next rows (at most ``budget`` of them).
    Admitting by time rather than by row count keeps the inputs aligned, so the ready bound ``R =
    min_j last_ts(j)`` moves as far as the budget allows and few rows wait in state (the Tuple-Gate
    of Gulisano et al. (2016), §5.5, buffers exactly the rows above ``R``). Ties at the threshold go
    to the lowest input ids. Out-of-order rows are ranked by the running maximum (the time the input
    has reached), which is what the ready bound sees.
    """
    if budget is None or sum(len(h) for h in heads) <= budget:
        return [len(h) for h in heads]
    reached = [np.maximum.accumulate(np.maximum(h, h[0] if last is None else last))
               if len(h) else h for h, last in zip(heads, last_ts, strict=True)]
    threshold = np.partition(np.concatenate(reached), budget - 1)[budget - 1]
    below = [int(np.searchsorted(r, threshold, side="left")) for r in reached]
    spare, shares = budget - sum(below), []
    for r, b in zip(reached, below, strict=True):
        take = min(spare, int(np.searchsorted(r, threshold, side="right")) - b)
        spare -= take
        shares.append(b + take)
    return shares


def advance(stream: InputStream, files: list[str], start: Cursor, n_rows: int,
            ts_column: str, policy: str, finish_when_exhausted: bool,
            ts: np.ndarray | None = None) -> Cursor:
    """The cursor ``n_rows`` rows after ``start`` (called on the driver).

    Reads the timestamp column of those rows (unless ``ts`` already holds them) to record
    ``last_ts`` and to fail early on out-of-order input. With ``finish_when_exhausted`` the
    input is marked finished once every listed file is consumed; a finished cursor never moves
    again.
    """
    if start.finished:
        return start
    end = start
    if n_rows > 0:
        with naming_input(stream):
            ranges = _walk(files, start, stream.fmt, n_rows)
        last_file, _, last_stop = ranges[-1]
        if ts is None or len(ts) != n_rows:
            ts = peek_event_times(stream, files, start, n_rows, ts_column)
        try:
            keep = in_order_mask(ts, start.last_ts, policy, stream.input_id, start.seq)
        except OutOfOrderError as exc:
            raise locate(exc, stream, files, start) from None
        kept = ts if keep is None else ts[keep]
        if len(kept) < len(ts):
            _warn_dropped(stream, len(ts) - len(kept), start.seq, n_rows)
        last = start.last_ts
        if len(kept):
            last = int(kept[-1]) if last is None else max(last, int(kept[-1]))
        end = Cursor(last_file, last_stop, start.seq + n_rows, last, False)
    return _finish(stream, files, end, finish_when_exhausted)


def advance_to(stream: InputStream, files: list[str], start: Cursor, n_rows: int,
               last_ts: int | None, finish_when_exhausted: bool) -> Cursor:
    """The cursor ``n_rows`` rows after ``start`` whose greatest event time is ``last_ts``.

    For admission that knows ``last_ts`` without reading the rows (Parquet statistics,
    ``inputs/row_groups.py``); their order is checked where they are read, in the tasks.
    """
    if start.finished:
        return start
    end = start
    if n_rows > 0:
        with naming_input(stream):
            last_file, _, last_stop = _walk(files, start, stream.fmt, n_rows)[-1]
        end = Cursor(last_file, last_stop, start.seq + n_rows, last_ts, False)
    return _finish(stream, files, end, finish_when_exhausted)


def _finish(stream: InputStream, files: list[str], end: Cursor, finish: bool) -> Cursor:
    """``end``, marked finished when ``finish`` and every listed row is consumed."""
    if finish and available_rows(files, end, stream.fmt, 1, stream) == 0:
        end = replace(end, finished=True)
    return end


def warn_ignored_files(stream: InputStream, files: list[str], cursor: Cursor,
                       warn: Callable[[str], None] = log.warning) -> None:
    """Warn about files added to an input after it was marked finished (they are ignored)."""
    if cursor.finished and cursor.file is not None:
        later = [f for f in files if f > cursor.file]
        if later:
            warn(f"input {stream.input_id} has finished (endOfInput); {len(later)} file(s) "
                 f"added since are ignored, e.g. {later[0]!r}")
