"""Checksummed JSON records: small state files a reader can trust byte for byte (no pyspark).

The sink's commit markers and owner record and the source's ``_query.json`` are JSON, so a
person can read them; :func:`seal` adds a ``"checksum"`` field (SHA-256 of the canonical JSON of
the other fields, first 16 hex digits) and :func:`unseal` checks it, so a flipped byte in a
number or a path is reported as corruption instead of being read as another value.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import read_bytes

CHECKSUM = "checksum"


def _digest(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def seal(record: dict[str, Any], indent: int | None = None) -> bytes:
    """``record`` as JSON bytes with its checksum (``record`` must not hold ``"checksum"``)."""
    return json.dumps({**record, CHECKSUM: _digest(record)}, indent=indent).encode()


def unseal(data: bytes) -> dict[str, Any]:
    """The record :func:`seal` wrote, without its checksum.

    Raises
    ------
    ValueError
        When ``data`` is not JSON, not an object, has no checksum or a wrong one (the caller
        names the file).
    """
    record = json.loads(data)
    if not isinstance(record, dict) or not isinstance(record.get(CHECKSUM), str):
        raise ValueError("not a checksummed record")
    checksum = record.pop(CHECKSUM)
    if checksum != _digest(record):
        raise ValueError("truncated or damaged: its content does not match its checksum")
    return record


def read_record(path: str, what: str, advice: str) -> dict[str, Any]:
    """Read and check a :func:`seal`-ed record file.

    Raises
    ------
    StateError
        Missing (``"<what> is missing: <path>"``), or truncated or corrupt (``"<what> <path>
        is corrupt (...)"``), followed by ``advice``.
    """
    data = read_bytes(path, what, advice)
    try:
        return unseal(data)
    except ValueError as exc:  # not JSON, not UTF-8, a wrong checksum: the bytes are damaged
        raise StateError(f"{what} {path} is corrupt ({exc}); {advice}") from exc
