"""Offsets of the ``ordered-agg`` source: per-input cursors as JSON with a fixed key order.

An offset is a plain dict (what Spark's Python source API exchanges; Spark stores its JSON text
in the checkpoint's offset log)::

    {"format": "ordered-agg-offset", "version": 3, "owner": "5f0c...e2",
     "inputs": [{"file": "/data/in0/part-0003.parquet", "row": 1200, "seq": 51200,
                 "last_ts": 1700000012000, "finished": false, "idle": false}, ...]}

``owner`` is the token of the query that owns the state location
(:mod:`spark_stream_sched.runtime.state.owner`): drawn when Spark asks a fresh checkpoint for its
initial offset and carried into every later offset, so the offsets a checkpoint logs name the
query that wrote them. Offsets of version 2 (an earlier release) have no ``owner``.

Per input: ``file`` is the file the cursor is in (``null`` before the first file), ``row`` the
number of rows of that file already consumed (``row`` may equal the file's row count: the next
row is then the first row of the next file in name order), ``seq`` the rows consumed from the
input so far (= the ``seq`` of the next row), ``last_ts`` the largest event time consumed so far
(``null`` before any row; the ready bound ``R`` is computed from it), ``finished`` whether the
input has ended (see option ``endOfInput``; once true it stays true), ``idle`` whether the
driver found the input idle for longer than option ``idleTimeout`` when it planned the batch
(recorded here so that replays reproduce the same ready bound).

The batch's state version is derived from the offset (:func:`version_id`), so a replayed batch
(same start and end offsets) reloads exactly the state it started from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from spark_stream_sched.errors import StateError
from spark_stream_sched.inputs.streams import Cursor
from spark_stream_sched.runtime.merge import ready_bound

FORMAT = "ordered-agg-offset"
VERSION = 3
#: Offsets logged by an earlier release: no ``owner`` (the location adopts their checkpoint).
LEGACY_VERSION = 2
_CURSOR_KEYS = ("file", "row", "seq", "last_ts", "finished", "idle")


@dataclass(frozen=True)
class Offset:
    """Cursors of all inputs at a micro-batch boundary, and the owner token they were made by.

    ``owner`` does not take part in comparisons (two offsets of one query compare by their
    cursors), but it does in :func:`version_id`.
    """

    cursors: tuple[Cursor, ...]
    owner: str | None = field(default=None, compare=False)

    @classmethod
    def initial(cls, n_inputs: int, owner: str | None = None) -> Offset:
        """The offset before any row of ``n_inputs`` inputs."""
        return cls(tuple(Cursor() for _ in range(n_inputs)), owner)

    def to_json(self) -> dict[str, Any]:
        """Return the offset as the dict Spark stores (fixed key order)."""
        inputs = [c.to_json() for c in self.cursors]
        if self.owner is None:
            return {"format": FORMAT, "version": LEGACY_VERSION, "inputs": inputs}
        return {"format": FORMAT, "version": VERSION, "owner": self.owner, "inputs": inputs}

    def text(self) -> str:
        """Canonical JSON text of the offset."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @property
    def total_seq(self) -> int:
        """Rows consumed over all inputs (non-decreasing from batch to batch)."""
        return sum(c.seq for c in self.cursors)

    @property
    def newest_ts(self) -> int | None:
        """The largest event time consumed over all inputs (None before any row)."""
        return max((c.last_ts for c in self.cursors if c.last_ts is not None), default=None)

    @property
    def all_finished(self) -> bool:
        """True once every input has finished."""
        return all(c.finished for c in self.cursors)

    def ready_bound(self) -> int | None:
        """``R`` at this offset (idle inputs included): the runtime's one readiness rule.

        :func:`~spark_stream_sched.runtime.merge.ready_bound` over the cursors' ``last_ts``,
        ``finished`` and ``idle`` (option ``idleTimeout``).
        """
        return ready_bound([c.last_ts for c in self.cursors], [c.finished for c in self.cursors],
                           [c.idle for c in self.cursors])


def lag_ms(offset: Offset) -> int | None:
    """How far the ready bound trails the newest input at ``offset``, in event-time ms.

    ``max_j last_ts(j) - R``: 0 once every input has finished (``R`` is +infinity), None while
    ``R`` is undefined (an unfinished input has sent nothing).
    """
    bound = offset.ready_bound()
    newest = offset.newest_ts
    if bound is None or newest is None:
        return None
    return max(0, newest - bound)


def version_id(offset: Offset) -> str:
    """Name of the state version reached at ``offset``: ``<total seq>-<digest>``.

    The zero-padded row total makes names sort in batch order; the digest of the canonical JSON
    tells apart offsets with equal totals (e.g. one that only marks an input finished).
    """
    digest = hashlib.sha256(offset.text().encode()).hexdigest()[:16]
    return f"{offset.total_seq:015d}-{digest}"


def _bad(text: Any, what: str) -> StateError:
    return StateError(f"offset {json.dumps(text)[:300]} is not an ordered-agg offset: {what}; "
                      f"the checkpoint was written by another source or version — start the "
                      f"query with a new checkpointLocation and stateLocation")


def unreadable_offset(exc: json.JSONDecodeError) -> StateError:
    """The error for offset text that is not JSON: a truncated or corrupt checkpoint offset log.

    Spark keeps the source's offsets as JSON text in ``<checkpointLocation>/offsets/<batch id>``
    and hands that text to the source unchecked; pyspark's source runner parses it before the
    source sees it, so this names the file to repair instead of leaving a bare JSONDecodeError.
    """
    return StateError(
        f"a source offset in the query's checkpoint offset log is not valid JSON ({exc.msg} at "
        f"character {exc.pos} of {len(exc.doc)}): a file under <checkpointLocation>/offsets/ "
        f"was truncated or corrupted (e.g. a full disk or a copy cut short). Restore it, or "
        f"delete the newest offsets/<batch id> file (and commits/<batch id> if present) so "
        f"that Spark plans that batch again, or restart with a new checkpointLocation and "
        f"stateLocation")


def _cursor(raw: Any, where: Any) -> Cursor:
    if not isinstance(raw, dict) or set(raw) != set(_CURSOR_KEYS):
        raise _bad(where, f"a cursor must have the keys {list(_CURSOR_KEYS)}")
    ok = (
        (raw["file"] is None or isinstance(raw["file"], str))
        and isinstance(raw["row"], int) and raw["row"] >= 0
        and isinstance(raw["seq"], int) and raw["seq"] >= 0
        and (raw["last_ts"] is None or isinstance(raw["last_ts"], int))
        and isinstance(raw["finished"], bool)
    )
    if not ok:
        raise _bad(where, f"cursor {raw} has a value of the wrong type")
    if not isinstance(raw["idle"], bool):
        raise _bad(where, f"cursor {raw} has a value of the wrong type")
    return Cursor(raw["file"], raw["row"], raw["seq"], raw["last_ts"], raw["finished"],
                  raw["idle"])


def parse_offset(raw: Any, n_inputs: int) -> Offset:
    """Parse an offset dict (or its JSON text) for a query with ``n_inputs`` inputs.

    Raises
    ------
    StateError
        Wrong format name or version, wrong keys or types, or a cursor count that differs from
        the number of inputs (the ``inputs`` option changed since the checkpoint was written).
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise unreadable_offset(exc) from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise _bad(raw, f"'format' is not {FORMAT!r}")
    if raw.get("version") not in (VERSION, LEGACY_VERSION):
        raise _bad(raw, f"version {raw.get('version')!r} is not supported (expected {VERSION})")
    owner = raw.get("owner")
    if (raw["version"] == VERSION) != isinstance(owner, str):
        raise _bad(raw, f"'owner' must be a token in version {VERSION} and absent before")
    inputs = raw.get("inputs")
    if not isinstance(inputs, list):
        raise _bad(raw, "'inputs' is not a list")
    if len(inputs) != n_inputs:
        raise StateError(f"the checkpoint's offset has {len(inputs)} input cursors but option "
                         f"inputs names {n_inputs} inputs; the inputs of a query cannot change — "
                         f"start it with a new checkpointLocation and stateLocation")
    return Offset(tuple(_cursor(c, raw) for c in inputs), owner)
