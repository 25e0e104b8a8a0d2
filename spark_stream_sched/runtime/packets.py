"""Columnar packets: Arrow tables of tuples, event-time normalisation and packet sizing.

A *packet* is a :class:`pyarrow.Table` (or RecordBatch) holding consecutive tuples of one
stream. Event time is int64 milliseconds since the epoch; inputs may carry an Arrow
``timestamp`` column instead, which :func:`event_times` converts. Rows released by S-Merge carry
two reserved columns, :data:`INPUT_COL` and :data:`SEQ_COL`, that give each tuple its identity
``(input, seq)`` (README, "Semantics").

Packet size follows the Bobox scheduler (Falt & Yaghob 2011, §4): a packet should fit in half of the
L2 cache, so that the operator that produces it and the one that consumes it find it in cache.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError

#: Reserved column: 0-based id of the input a released tuple came from (int32).
INPUT_COL = "__input"
#: Reserved column: 0-based position of the tuple in its input, dropped tuples included (int64).
SEQ_COL = "__seq"
#: Largest event time; the ready bound once every input has finished (+infinity).
TS_MAX = int(np.iinfo(np.int64).max)
#: Earliest supported event time: 0001-01-01T00:00:00.000Z, the start of Spark's timestamp range.
EVENT_TIME_MIN = -62_135_596_800_000
#: Latest supported event time: 9999-12-31T23:59:59.999Z, the end of Spark's timestamp range.
EVENT_TIME_MAX = 253_402_300_799_999
#: Length of the supported range in ms (about 10,000 years); also the longest window or slide.
#: With it, every window end ``k*S + W`` of a supported ``ts`` stays far below :data:`TS_MAX`
#: (``EVENT_TIME_MAX + EVENT_TIME_SPAN`` is about 5.7e14), so no window can be lost to overflow.
EVENT_TIME_SPAN = EVENT_TIME_MAX - EVENT_TIME_MIN + 1
#: Used when the OS does not report an L2 cache size.
DEFAULT_L2_BYTES = 1024 * 1024

_UNIT_TO_MS_DIVISOR = {"ms": 1, "us": 1000, "ns": 1_000_000}

Data: TypeAlias = pa.Table | pa.RecordBatch


def _parse_cache_size(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1024, "M": 1024 * 1024, "G": 1024**3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor


@functools.cache
def l2_cache_bytes() -> int:
    """Return the size of the L2 cache of CPU 0 in bytes, as the OS reports it.

    Reads ``/sys/devices/system/cpu/cpu0/cache/index*/`` (Linux) and falls back to
    ``os.sysconf("SC_LEVEL2_CACHE_SIZE")`` and then :data:`DEFAULT_L2_BYTES`.
    """
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    with contextlib.suppress(OSError, ValueError):  # no sysfs: try sysconf
        for index in sorted(base.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                return _parse_cache_size((index / "size").read_text())
    with contextlib.suppress(ValueError, OSError, AttributeError):  # unknown name: default
        size = os.sysconf("SC_LEVEL2_CACHE_SIZE")
        if size > 0:
            return int(size)
    return DEFAULT_L2_BYTES


def default_packet_rows(row_bytes: int, cache_bytes: int | None = None) -> int:
    """Rows per packet so that one packet fills half of the L2 cache (Falt & Yaghob 2011, §4.2).

    Parameters
    ----------
    row_bytes:
        Average in-memory size of one row (sum of its columns' widths).
    cache_bytes:
        Override for the L2 size; defaults to :func:`l2_cache_bytes`.
    """
    cache = cache_bytes if cache_bytes is not None else l2_cache_bytes()
    return max(64, (cache // 2) // max(1, row_bytes))


def row_bytes(schema: pa.Schema) -> int:
    """Estimate one row's size from the schema (variable-width columns count 16 bytes)."""
    total = 0
    for field in schema:
        try:
            total += max(1, field.type.bit_width // 8)
        except ValueError:
            total += 16
    return max(1, total)


def iter_packets(data: Data, rows: int) -> Iterator[pa.Table]:
    """Split ``data`` into consecutive zero-copy slices of at most ``rows`` rows."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    for start in range(0, table.num_rows, rows):
        yield table.slice(start, rows)


def as_table(data: Data) -> pa.Table:
    """Return ``data`` as a table (RecordBatches are wrapped without copying)."""
    return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])


def event_times(table: pa.Table, ts_column: str, where: str, first_row: int = 0) -> np.ndarray:
    """Return the event times of ``table`` as an int64 NumPy array of milliseconds.

    Integer columns are taken as milliseconds; ``timestamp`` columns of any unit are converted
    (floor division, so times before the epoch stay ordered). Every returned value lies in the
    supported range :data:`EVENT_TIME_MIN` .. :data:`EVENT_TIME_MAX` (Spark's timestamp range),
    so pane and window arithmetic on it cannot overflow int64.

    Parameters
    ----------
    table:
        Rows whose event times are wanted.
    ts_column:
        Name of the event-time column.
    where:
        Names the input (and file, where known) in error messages.
    first_row:
        Position of ``table``'s first row in that input or file; error messages report
        ``first_row + i`` for the offending row ``i``.

    Raises
    ------
    InputError
        When the column is missing, null somewhere, of another type, or holds a value outside
        the supported range (the message names the row and suggests the likely unit mistake).
    """
    if ts_column not in table.column_names:
        raise InputError(
            f"{where}: timestamp column {ts_column!r} not found; columns are {table.column_names}"
        )
    column = table.column(ts_column)
    if column.null_count:
        first_null = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"{where}: timestamp column {ts_column!r} is null at row "
                         f"{first_row + first_null}")
    kind = column.type
    if pa.types.is_integer(kind):
        raw = column.to_numpy()
        if pa.types.is_unsigned_integer(kind):  # checked before int64 could wrap a uint64
            check_event_time_range(raw, ts_column, where, first_row)
        ts = np.asarray(raw, dtype=np.int64)
        check_event_time_range(ts, ts_column, where, first_row)
        return ts
    if pa.types.is_timestamp(kind):
        return _timestamp_ms(column, ts_column, where, first_row)
    raise InputError(
        f"{where}: timestamp column {ts_column!r} has type {kind}; expected an integer "
        f"(milliseconds since the epoch) or a timestamp"
    )


def _timestamp_ms(column: pa.ChunkedArray, ts_column: str, where: str,
                  first_row: int) -> np.ndarray:
    """Convert a timestamp column to ms, checking the range before anything can overflow."""
    unit = column.type.unit
    raw = np.asarray(column.cast(pa.int64()).to_numpy(), dtype=np.int64)
    if unit == "s":  # seconds * 1000 could overflow int64: check the raw seconds first
        bad = _first_outside(raw, EVENT_TIME_MIN // 1000, EVENT_TIME_MAX // 1000)
        if bad is not None:
            raise _range_error(ts_column, where, first_row + bad, f"{int(raw[bad])} s", None)
        return raw * 1000
    divisor = _UNIT_TO_MS_DIVISOR[unit]
    ts = raw if divisor == 1 else np.floor_divide(raw, divisor)
    check_event_time_range(ts, ts_column, where, first_row)
    return ts


def _first_outside(values: np.ndarray, lo: int, hi: int) -> int | None:
    """Index of the first value outside ``[lo, hi]``; None when all are inside (or empty)."""
    if len(values) == 0 or (int(values.min()) >= lo and int(values.max()) <= hi):
        return None
    return int(np.flatnonzero((values < lo) | (values > hi))[0])


def check_event_time_range(ts: np.ndarray, ts_column: str, where: str,
                           first_row: int = 0) -> None:
    """Raise :class:`InputError` unless every ``ts`` (integer ms) is in the supported range.

    The supported range is :data:`EVENT_TIME_MIN` .. :data:`EVENT_TIME_MAX`, years 0001 to
    9999 as in Spark's ``TimestampType``. The message names ``where``, the row
    (``first_row + i``), the value and the likely cause (microseconds, nanoseconds, a sentinel).
    """
    bad = _first_outside(ts, EVENT_TIME_MIN, EVENT_TIME_MAX)
    if bad is not None:
        value = int(ts[bad])
        raise _range_error(ts_column, where, first_row + bad, f"{value} ms", value)


def _range_error(ts_column: str, where: str, row: int, shown: str,
                 value_ms: int | None) -> InputError:
    return InputError(
        f"{where}: event time {shown} in column {ts_column!r} at row {row} is outside the "
        f"supported range {EVENT_TIME_MIN} .. {EVENT_TIME_MAX} ms since the epoch "
        f"(0001-01-01 .. 9999-12-31 UTC, Spark's timestamp range); {_unit_hint(value_ms)}")


def _unit_hint(value_ms: int | None) -> str:
    """Guess why an event time is out of range and say what to do."""
    if value_ms is None:
        return "fix or filter out that row"
    if value_ms in (TS_MAX, -TS_MAX - 1):
        return ("it looks like a sentinel such as Long.MaxValue/MinValue; filter such rows out "
                "or replace them with a real event time")
    for factor, unit in ((1000, "microseconds"), (1_000_000, "nanoseconds")):
        if EVENT_TIME_MIN <= value_ms // factor <= EVENT_TIME_MAX:
            return (f"it looks like {unit}; convert the column to milliseconds since the epoch "
                    f"(divide by {factor}) or declare it as a timestamp type")
    return "event times must be int64 milliseconds since the epoch; fix or filter out that row"
