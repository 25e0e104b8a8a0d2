"""The ``ordered-agg`` sink's commit log and owner record (no pyspark).

Under ``stateLocation`` (the whole layout: :mod:`~spark_stream_sched.runtime.engine.sink_commit`)::

    _sink.json                      owner: checkpoint, Spark query id, output path, fingerprint
    commits/batch-<id>.json         commit marker of batch <id> (written last, atomically); names
                                    the state version the batch committed; the newest
                                    ``keepMetrics`` (at least ``keepVersions``) are kept
    commits/final.json              marker of finish_sink(): every input finished

The owner record is created once, exclusively
(:func:`~spark_stream_sched.runtime.state.atomic.create_exclusively`, so two queries racing for
a fresh location cannot both win), before the first output is written. Every commit checks it
*before* anything is treated as a replay, so a reused or shared location fails with a message
naming both queries instead of silently skipping batches (issue 12). Markers and the owner
record are checksummed JSON (:mod:`~spark_stream_sched.runtime.state.records`). Every file is
written with
:func:`~spark_stream_sched.runtime.state.atomic.atomic_write`; a missing, truncated or corrupt
one is a :class:`~spark_stream_sched.errors.StateError` naming it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write, create_exclusively
from spark_stream_sched.runtime.state.records import read_record, seal

OWNER_FILE = "_sink.json"
OWNER_FORMAT = "ordered-agg-sink-owner"
FINAL = "final"
#: Owner fields that identify one query; all must match on every commit.
IDENTITY_FIELDS = ("checkpoint_location", "query_id", "output_path")
_MARKER = re.compile(r"^batch-(\d{12})\.json$")
_DAMAGED = ("the sink's commit log is damaged — restore the file from a backup, or start the "
            "query with a new checkpointLocation, stateLocation and output path")


def batch_name(batch_id: int) -> str:
    """Name of a batch in the commit log, staging and state directories (sorts by id)."""
    return f"batch-{batch_id:012d}"


def commit_path(location: str, name: str) -> Path:
    """Path of the commit marker ``name`` (a :func:`batch_name` or :data:`FINAL`)."""
    return Path(location) / "commits" / f"{name}.json"


def read_marker(path: Path) -> dict[str, Any]:
    """Read one commit marker; a truncated or foreign file is a StateError naming it."""
    record = read_record(str(path), "ordered-agg sink commit marker", _DAMAGED)
    if "batch_id" not in record or not {"version", "groups", "state"} & set(record):
        raise StateError(f"ordered-agg sink commit marker {path} is not a commit record; "
                         f"restore it or start the query with new locations")
    return record


def read_markers(location: str) -> list[dict[str, Any]]:
    """Every commit marker in batch order (the ``final`` marker last)."""
    directory = Path(location) / "commits"
    if not directory.is_dir():
        return []
    records = [read_marker(p) for p in directory.glob("*.json")]
    return sorted(records, key=lambda r: (r["batch_id"] == FINAL, r.get("order", 0)))


def write_marker(location: str, name: str, record: dict[str, Any]) -> None:
    """Write a commit marker atomically (the commit point of its batch)."""
    atomic_write(str(commit_path(location, name)), seal(record))


def marker_ids(location: str) -> list[int]:
    """Batch ids that have a commit marker, ascending (``final`` not included).

    Read from the names alone, so a commit reads only the markers it needs.
    """
    try:
        names = os.listdir(Path(location) / "commits")
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_MARKER.match, names) if m)


def prune_markers(location: str, keep: int) -> int:
    """Delete the commit markers of all but the newest ``keep`` batches; return how many.

    A replay needs only the newest marker (Spark re-runs at most the batch after its last
    committed one, whose marker this sink may have written), and the next batch the one before
    it; older markers are history (each holds its batch's figures).
    """
    ids = marker_ids(location)
    doomed = ids[: max(0, len(ids) - max(1, keep))]
    for batch_id in doomed:
        commit_path(location, batch_name(batch_id)).unlink(missing_ok=True)
    return len(doomed)


# -- owner record ------------------------------------------------------------------------------


def spark_query_id(checkpoint_location: str | None) -> str | None:
    """The query id Spark recorded in ``<checkpoint>/metadata`` (None when not readable).

    Spark writes that file when a query first starts; a checkpoint directory that was deleted
    and recreated gets a new id, which is how a fresh query on an old state location is told
    apart from a restart. Only local paths (or ``file:`` URIs) can be read from here.
    """
    if not checkpoint_location:
        return None
    path = checkpoint_location.removeprefix("file://").removeprefix("file:")
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as fh:
            first = fh.readline()
        value = json.loads(first).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def owner_record(checkpoint_location: str | None, output_path: str,
                 fingerprint: str) -> dict[str, Any]:
    """The owner record of the query now running (compared with the recorded one)."""
    checkpoint = os.path.abspath(checkpoint_location) if checkpoint_location else None
    return {"format": OWNER_FORMAT, "version": 1, "checkpoint_location": checkpoint,
            "query_id": spark_query_id(checkpoint_location),
            "output_path": os.path.abspath(output_path), "fingerprint": fingerprint}


def read_owner(path: Path) -> dict[str, Any]:
    """The owner record at ``path`` (StateError when it is damaged or foreign)."""
    owner = read_record(str(path), "ordered-agg sink owner record",
                        "restore it or use a new stateLocation")
    if owner.get("format") != OWNER_FORMAT:
        raise StateError(f"{path} is not an ordered-agg sink owner record; this stateLocation "
                         f"belongs to something else — use a new stateLocation")
    return owner


def _describe(owner: dict[str, Any]) -> str:
    return (f"checkpointLocation={owner.get('checkpoint_location')!r}, Spark query id "
            f"{owner.get('query_id')!r}, output path {owner.get('output_path')!r}")


def claim(location: str, mine: dict[str, Any], has_foreign_output: bool) -> bool:
    """Make ``mine`` the owner of a fresh location, or check that it already is.

    Returns True when this call created the owner record.

    Raises
    ------
    StateError
        The location belongs to another query (other checkpoint, Spark query id or output
        path), was written with other options, holds commits but no owner record, or is fresh
        while the output path already holds results (``has_foreign_output``).
    """
    path = Path(location) / OWNER_FILE
    if not path.exists():
        if (Path(location) / "commits").is_dir() and any((Path(location) / "commits").iterdir()):
            raise StateError(f"ordered-agg sink stateLocation {location} holds commit markers "
                             f"but no owner record {OWNER_FILE}; it was written by another "
                             f"version or damaged — use a new stateLocation and output path")
        if has_foreign_output:
            raise StateError(f"output path {mine['output_path']} already holds results but the "
                             f"sink state in {location} is empty; restart with the original "
                             f"checkpoint and stateLocation, or write to a new path")
        record = {**mine, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "host": socket.gethostname(), "pid": os.getpid()}
        if create_exclusively(str(path), seal(record, indent=1)):
            return True
    check_owner(location, mine)
    return False


def check_owner(location: str, mine: dict[str, Any]) -> None:
    """Refuse to use ``location`` unless ``mine`` matches its owner record."""
    path = Path(location) / OWNER_FILE
    owner = read_owner(path)
    for field in IDENTITY_FIELDS:
        recorded, now = owner.get(field), mine.get(field)
        if recorded is not None and recorded != now:
            raise StateError(
                f"ordered-agg sink stateLocation {location} belongs to another query "
                f"({_describe(owner)}); this query has {_describe(mine)}. Two queries cannot "
                f"share a sink stateLocation: give this one its own stateLocation (and output "
                f"path), or restart the original query from its own checkpoint")
    if owner.get("fingerprint") != mine.get("fingerprint"):
        raise StateError(f"ordered-agg sink state in {location} was written with other options "
                         f"(window, keys, aggregates, inputs, ...); use a new checkpoint, "
                         f"stateLocation and output path for a changed query")
