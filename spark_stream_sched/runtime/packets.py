"""Columnar packets: Arrow tables of tuples, event-time normalisation and packet sizing.

A *packet* is a :class:`pyarrow.Table` (or RecordBatch) holding consecutive tuples of one
stream. Event time is int64 milliseconds since the epoch; inputs may carry an Arrow
``timestamp`` column instead, which :func:`event_times` converts. Rows released by S-Merge carry
two reserved columns, :data:`INPUT_COL` and :data:`SEQ_COL`, that give each tuple its identity
``(input, seq)`` (DESIGN.md §2).

Packet size follows the Bobox scheduler (seed 000 §4): a packet should fit in half of the L2
cache, so that the operator that produces it and the one that consumes it find it in cache.
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
    """Rows per packet so that one packet fills half of the L2 cache (seed 000 §4.2).

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


def event_times(table: pa.Table, ts_column: str, where: str) -> np.ndarray:
    """Return the event times of ``table`` as an int64 NumPy array of milliseconds.

    Integer columns are taken as milliseconds; ``timestamp`` columns of any unit are converted
    (floor division, so times before the epoch stay ordered). ``where`` names the input in
    error messages.

    Raises
    ------
    InputError
        When the column is missing, null somewhere, or of another type.
    """
    if ts_column not in table.column_names:
        raise InputError(
            f"{where}: timestamp column {ts_column!r} not found; columns are {table.column_names}"
        )
    column = table.column(ts_column)
    if column.null_count:
        first_null = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise InputError(f"{where}: timestamp column {ts_column!r} is null at row {first_null}")
    kind = column.type
    if pa.types.is_integer(kind):
        return np.asarray(column.to_numpy(), dtype=np.int64)
    if pa.types.is_timestamp(kind):
        raw = np.asarray(column.cast(pa.int64()).to_numpy(), dtype=np.int64)
        if kind.unit == "s":
            return raw * 1000
        divisor = _UNIT_TO_MS_DIVISOR[kind.unit]
        return raw if divisor == 1 else np.floor_divide(raw, divisor)
    raise InputError(
        f"{where}: timestamp column {ts_column!r} has type {kind}; expected an integer "
        f"(milliseconds since the epoch) or a timestamp"
    )


def empty_like(schema: pa.Schema) -> pa.Table:
    """Return an empty table with ``schema``."""
    return schema.empty_table()
