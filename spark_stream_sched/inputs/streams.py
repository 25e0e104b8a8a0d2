"""An input stream and a position in it: the two values the input layer passes around.

:class:`InputStream` names one input (id, path, format, row schema); :class:`Cursor` is a
position in it, serialised into the source's offsets (``inputs/offsets.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass(frozen=True)
class Cursor:
    """Position in one input stream (serialised by ``inputs/offsets.py``)."""

    file: str | None = None
    row: int = 0
    seq: int = 0
    last_ts: int | None = None
    finished: bool = False
    idle: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the cursor as a dict with the fixed key order."""
        return {"file": self.file, "row": self.row, "seq": self.seq, "last_ts": self.last_ts,
                "finished": self.finished, "idle": self.idle}


@dataclass(frozen=True)
class InputStream:
    """One input: its path, file format and row schema (picklable)."""

    input_id: int
    path: str
    fmt: str
    schema: pa.Schema | None
