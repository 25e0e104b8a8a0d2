"""Versioned, checksummed snapshots of runtime state, without pickle.

Layout of a snapshot (all integers little-endian)::

    b"SSSNAP"                 6 bytes magic
    u16 format version        FORMAT_VERSION
    u16 + bytes               kind (e.g. "smerge", "window"), UTF-8
    u32 + bytes               metadata, JSON (UTF-8, sorted keys)
    u16                       number of tables
    per table: u16 + name, u64 + Arrow IPC stream bytes
    32 bytes                  SHA-256 of everything above

:func:`decode` checks the digest before it parses anything, so a truncated or corrupted file is
reported as such (:class:`~spark_stream_sched.errors.StateError`) and never half-loaded.
:func:`read_snapshot` reads a snapshot file and names it in every error (missing, truncated,
corrupt, wrong kind); :func:`write_snapshot` writes one atomically
(:func:`~spark_stream_sched.runtime.state.atomic.atomic_write`).
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write, read_bytes

MAGIC = b"SSSNAP"
FORMAT_VERSION = 1
_DIGEST = 32


def _table_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def encode(kind: str, meta: dict[str, Any], tables: dict[str, pa.Table]) -> bytes:
    """Serialise ``meta`` (JSON-able) and ``tables`` into snapshot bytes of ``kind``."""
    parts = [MAGIC, struct.pack("<H", FORMAT_VERSION)]
    kind_b = kind.encode()
    meta_b = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    parts += [struct.pack("<H", len(kind_b)), kind_b, struct.pack("<I", len(meta_b)), meta_b]
    parts.append(struct.pack("<H", len(tables)))
    for name, table in tables.items():
        name_b = name.encode()
        body = _table_bytes(table)
        parts += [struct.pack("<H", len(name_b)), name_b, struct.pack("<Q", len(body)), body]
    payload = b"".join(parts)
    return payload + hashlib.sha256(payload).digest()


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise StateError("snapshot is truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> int:
        return int(struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0])


def decode(data: bytes, expected_kind: str) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """Parse snapshot bytes written by :func:`encode`.

    Raises
    ------
    StateError
        When the bytes are not a snapshot, are truncated or corrupted (digest mismatch), have an
        unsupported format version, or hold another kind of state than ``expected_kind``.
    """
    if len(data) < len(MAGIC) + _DIGEST or not data.startswith(MAGIC):
        raise StateError("not a spark_stream_sched snapshot: bad magic, or truncated to "
                         f"{len(data)} bytes")
    payload, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(payload).digest() != digest:
        raise StateError("truncated or damaged: its content does not match its checksum")
    reader = _Reader(payload)
    reader.take(len(MAGIC))
    version = reader.unpack("<H")
    if version != FORMAT_VERSION:
        raise StateError(f"snapshot format version {version} is not supported "
                         f"(this build reads version {FORMAT_VERSION})")
    kind = reader.take(reader.unpack("<H")).decode()
    if kind != expected_kind:
        raise StateError(f"snapshot holds {kind!r} state, expected {expected_kind!r}")
    meta = json.loads(reader.take(reader.unpack("<I")).decode())
    tables: dict[str, pa.Table] = {}
    for _ in range(reader.unpack("<H")):
        name = reader.take(reader.unpack("<H")).decode()
        body = reader.take(reader.unpack("<Q"))
        tables[name] = pa.ipc.open_stream(body).read_all()
    return meta, tables


def write_snapshot(path: str, kind: str, meta: dict[str, Any], tables: dict[str, pa.Table],
                   sync_dir: bool = True) -> None:
    """Encode a snapshot and write it to ``path`` atomically (SpillError naming it on failure)."""
    atomic_write(path, encode(kind, meta, tables), sync_dir=sync_dir)


def read_snapshot(path: str, expected_kind: str, what: str = "state file",
                  advice: str = "restore it from a backup or start from fresh state"
                  ) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """Read and decode the snapshot file ``path``.

    Raises
    ------
    StateError
        When the file is missing (``"<what> is missing: <path>; <advice>"``), truncated,
        corrupted or of another kind (``"state file <path> is corrupt (...); <advice>"``).
    """
    data = read_bytes(path, what, advice)
    try:
        return decode(data, expected_kind)
    except StateError as exc:
        raise StateError(f"state file {path} is corrupt ({exc}); {advice}") from exc
