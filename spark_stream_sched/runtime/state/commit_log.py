"""The ``ordered-agg`` sink's commit log, and its use of the owner record (no pyspark).

Under ``stateLocation`` (the whole layout: :mod:`~spark_stream_sched.runtime.engine.sink_commit`)::

    _sink.json                      owner: checkpoint, Spark query id, output path, fingerprint
    commits/batch-<id>.json         commit marker of batch <id> (written last, atomically); names
                                    the state version the batch committed; the newest
                                    ``keepMetrics`` (at least ``keepVersions``) are kept
    commits/final.json              marker of finish_sink(): every input finished

and ``<path>/_ordered-agg-sink.json``, the output path's owner record.

The owner record (:mod:`~spark_stream_sched.runtime.state.owner`, one implementation for the
source and the sink) is created once, exclusively, before the first output is written, and so is
the output path's (``<path>/_ordered-agg-sink.json``: checkpoint, Spark query id, state
location). Every commit checks both *before* anything is treated as a replay or written, so a
reused or shared location or output path fails with a message naming both queries instead of
silently skipping batches or replacing another query's results. Markers and
the owner record are checksummed JSON (:mod:`~spark_stream_sched.runtime.state.records`), every
file is written with :func:`~spark_stream_sched.runtime.state.atomic.atomic_write`; a missing,
truncated or corrupt one is a :class:`~spark_stream_sched.errors.StateError` naming it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.owner import (
    OUTPUT,
    SINK,
    create_owner,
    output_owner,
    owner_path,
    read_owner,
)
from spark_stream_sched.runtime.state.owner import check_owner as owner_check
from spark_stream_sched.runtime.state.records import read_record, seal

OWNER_FILE = SINK.file
FINAL = "final"
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


# -- owner records (runtime/state/owner.py) ---------------------------------------------------


def claim(location: str, mine: dict[str, Any]) -> bool:
    """Make ``mine`` (:func:`~.owner.sink_owner`) the owner of a fresh location, or check it is.

    The output path is claimed in the same step (:func:`claim_output`): after the state
    location's record is checked, before a fresh one is created, so a query refused for either
    leaves no record of its own behind. Returns True when this call created the state
    location's owner record.

    Raises
    ------
    StateError
        The location belongs to another query (other checkpoint, Spark query id or output
        path), was written with other options, or holds commits but no owner record; or the
        output path is refused (:func:`claim_output`).
    """
    fresh = not owner_path(location, SINK).exists()
    if not fresh:
        check_owner(location, mine)
    elif (Path(location) / "commits").is_dir() and any((Path(location) / "commits").iterdir()):
        raise StateError(f"ordered-agg sink stateLocation {location} holds commit markers "
                         f"but no owner record {OWNER_FILE}; it was written by another "
                         f"version or damaged — use a new stateLocation and output path")
    claim_output(location, mine)
    if fresh and create_owner(location, SINK, mine):
        return True
    check_owner(location, mine)
    return False


def claim_output(location: str, mine: dict[str, Any]) -> None:
    """Make the sink query ``mine`` of ``location`` the owner of its output path, or check it is.

    ``<path>/_ordered-agg-sink.json`` is created exclusively before the query writes its first
    file, so of two queries started together on one path exactly one wins, and the other is
    refused naming it before anything of the first's is replaced; every commit checks it
    again. A path without the record may be claimed only while the state location has no
    commit and the path holds no ``part-*.parquet`` file (results of no known query).

    Raises
    ------
    ConfigError
        The path is, or lies below, a regular file.
    StateError
        The path belongs to another query (checkpoint, Spark query id or stateLocation), holds
        results without a record, or lost its record after this query committed.
    """
    path = str(mine["output_path"])
    check_directory(path)
    ours = output_owner(mine, location)
    if read_owner(path, OUTPUT) is None:
        if marker_ids(location) or commit_path(location, FINAL).exists():
            raise StateError(f"ordered-agg sink output path {path} has no owner record "
                             f"{OUTPUT.file} but the sink state in {location} has committed "
                             f"batches: the record (or the output) was removed — restore it, or "
                             f"start with a new checkpointLocation, stateLocation and path")
        if any(Path(path).glob("part-*.parquet")):
            raise StateError(f"output path {path} already holds results but the sink state in "
                             f"{location} is empty; restart with the original checkpoint and "
                             f"stateLocation, or write to a new path")
        if create_owner(path, OUTPUT, ours):
            return
    owner_check(path, OUTPUT, ours)


def check_directory(path: str) -> None:
    """Refuse an output path that is, or lies below, something other than a directory.

    Raises
    ------
    ConfigError
        Naming the path, the regular file in the way and the fix.
    """
    for candidate in (Path(path), *Path(path).parents):
        if candidate.is_dir():
            return
        if os.path.lexists(candidate):
            where = "is" if candidate == Path(path) else f"lies below {str(candidate)!r}, which is"
            raise ConfigError(f"ordered-agg sink option path {path!r} {where} a file, not a "
                              f"directory; set path to a directory (new or existing) that no "
                              f"file is in the way of")


def check_owner(location: str, mine: dict[str, Any]) -> None:
    """Refuse to use ``location`` unless ``mine`` matches its owner record and options."""
    owner = owner_check(location, SINK, mine)
    if owner.get("fingerprint") != mine.get("fingerprint"):
        raise StateError(f"ordered-agg sink state in {location} was written with other options "
                         f"(window, keys, aggregates, inputs, ...); use a new checkpoint, "
                         f"stateLocation and output path for a changed query")
