"""Versioned per-partition-group state of the ``ordered-agg`` source under ``stateLocation``.

Layout (Spark state-store semantics: load version v, write v+1, keep the last few)::

    <stateLocation>/
      _query.json                  query definition fixed at first start (partition groups, ...),
                                   checksummed JSON (runtime/state/records.py)
      versions/
        000000000051200-1f0c...e2/      state after the batch that ended at the offset named by
          group-0000.state              spark.offsets.version_id(); one file per partition group
          group-0003.state

A version file is a runtime snapshot (:mod:`~spark_stream_sched.runtime.state.snapshot`: magic,
format version, SHA-256, Arrow IPC — never pickle) of kind ``"ordered-agg-group"`` holding the
group's rows that are not ready yet (``pending``) and the window operator's own snapshot bytes
(``window``). Every file is written by
:func:`~spark_stream_sched.runtime.state.atomic.atomic_write`, so a crash never leaves a
half-written version under its final name. Pure Python: no pyspark.

Two layouts are read. :func:`save_groups` writes every group of a version into its directory
(full rewrite). The source writes incrementally (:mod:`~.group_store`): only changed groups get
a file (:func:`encode_group`: its bytes depend on the state alone, so the snapshot's trailing
SHA-256 identifies the content), and per-task manifests (:mod:`~.manifests`) name where each
group's current file is. :func:`load_entry` resolves both; :func:`prune` keeps every file that a
kept version's manifest names (docs/state_store.md).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.state import manifests
from spark_stream_sched.runtime.state.atomic import atomic_write, fsync_dir, read_bytes
from spark_stream_sched.runtime.state.manifests import Entry
from spark_stream_sched.runtime.state.records import read_record, seal
from spark_stream_sched.runtime.state.snapshot import (
    decode,
    encode,
    read_snapshot,
    write_snapshot,
)

KIND = "ordered-agg-group"
QUERY_FILE = "_query.json"
SUFFIX = ".state"
#: Versions kept per group before the committed one (for replays and inspection).
KEEP_OLDER_VERSIONS = 2
#: Fields of the query definition that may never change for one stateLocation.
FIXED_FIELDS = ("partition_groups", "n_inputs", "timestamp_column", "key_columns",
                "window_ms", "slide_ms", "aggregates")
_ADVICE = ("the stateLocation does not match the checkpointLocation (restore the state "
           "directory, or restart the query with a fresh checkpointLocation and a fresh "
           "stateLocation)")


@dataclass
class GroupState:
    """State of one partition group between two micro-batches."""

    pending: pa.Table | None = None
    window: bytes | None = None


def version_dir(location: str, version: str) -> str:
    """Directory holding every group's state of one version."""
    return os.path.join(location, "versions", version)


def version_path(location: str, group: int, version: str) -> str:
    """Path of one state version of one group."""
    return os.path.join(version_dir(location, version), f"group-{group:04d}{SUFFIX}")


def record_query(location: str, definition: dict[str, Any]) -> None:
    """Record the query definition at first start; refuse a changed one later.

    Raises
    ------
    ConfigError
        When a fixed field (e.g. ``partitionGroups``) differs from the recorded one.
    StateError
        When the recorded definition cannot be read (naming the file).

    Notes
    -----
    Called on the driver (``streamReader()``), so the refusal happens at ``start()``.
    """
    path = os.path.join(location, QUERY_FILE)
    if not os.path.exists(path):
        atomic_write(path, seal(definition, indent=1))
        return
    recorded = read_query(location)
    for name in FIXED_FIELDS:
        if recorded.get(name) != definition.get(name):
            option = "partitionGroups" if name == "partition_groups" else name
            raise ConfigError(
                f"{option} is {definition.get(name)!r} but the query under stateLocation "
                f"{location!r} was started with {recorded.get(name)!r}; it is fixed when the "
                f"query first starts — set it back, or start a new query with a fresh "
                f"stateLocation and checkpointLocation")


def read_query(location: str) -> dict[str, Any]:
    """The query definition recorded in ``_query.json``; StateError naming the file if unusable."""
    path = os.path.join(location, QUERY_FILE)
    return read_record(path, "the recorded query definition",
                       "restore the file or use a new stateLocation and checkpointLocation")


def save_groups(location: str, version: str, states: dict[int, GroupState],
                meta: dict[str, Any]) -> None:
    """Write ``states`` (group -> state) as ``version``.

    One atomic file per group, then a single fsync of the version directory.
    """
    directory = version_dir(location, version)
    created = not os.path.isdir(directory)
    for group, state in states.items():
        write_snapshot(version_path(location, group, version), KIND,
                       {**meta, "group": group, "version": version}, _tables(state),
                       sync_dir=False)
    if os.path.isdir(directory):
        fsync_dir(directory)
    if created and os.path.isdir(directory):
        fsync_dir(os.path.dirname(directory))


def _tables(state: GroupState) -> dict[str, pa.Table]:
    tables: dict[str, pa.Table] = {}
    if state.pending is not None:
        tables["pending"] = state.pending
    if state.window is not None:
        tables["window"] = pa.table({"snapshot": pa.array([state.window], pa.binary())})
    return tables


def _state(tables: dict[str, pa.Table]) -> GroupState:
    window = tables["window"].column(0)[0].as_py() if "window" in tables else None
    return GroupState(tables.get("pending"), window)


def encode_group(group: int, state: GroupState) -> bytes:
    """Snapshot bytes of one group's state for the incremental layout.

    The metadata holds only the group id, so equal states give equal bytes: the trailing
    SHA-256 (:func:`digest_of`) tells whether a group changed in a batch.
    """
    return encode(KIND, {"group": group}, _tables(state))


def digest_of(data: bytes) -> str:
    """Hex SHA-256 that ends snapshot bytes (the digest of everything before it)."""
    return data[-32:].hex()


def decode_group(data: bytes, group: int, where: str) -> GroupState:
    """Inverse of :func:`encode_group` (StateError naming ``where`` if corrupt or misplaced)."""
    try:
        meta, tables = decode(data, KIND)
    except StateError as exc:
        raise StateError(f"state file {where} is corrupt ({exc}); {_ADVICE}") from exc
    if meta.get("group") != group:
        raise StateError(f"state file {where} holds group {meta.get('group')}, not {group}; "
                         f"{_ADVICE}")
    return _state(tables)


def load_entry(location: str, group: int, version: str
               ) -> tuple[GroupState, Entry | None, bytes | None]:
    """State of ``group`` at ``version``, with its manifest entry and file bytes.

    Versions with manifests resolve the group's file through them and check its digest; a
    version without manifests (full rewrite) reads ``versions/<version>/group-NNNN.state`` and
    returns no entry and no bytes.

    Raises
    ------
    StateError
        Missing, corrupt or misplaced state, naming the file and what to do.
    """
    manifest = manifests.read_manifest(version_dir(location, version), version)
    if manifest is None:
        return load_group(location, group, version), None, None
    entry = manifest.get(group)
    if entry is None:
        raise StateError(f"state of partition group {group} for version {version} is missing: "
                         f"no manifest of {version_dir(location, version)} names it; {_ADVICE}")
    path = version_path(location, group, entry.version)
    data = read_bytes(path, f"state of partition group {group} for version {version}", _ADVICE)
    if digest_of(data) != entry.digest:
        raise StateError(f"state file {path} does not match the manifest of version {version} "
                         f"(SHA-256 {digest_of(data)[:16]}..., expected {entry.digest[:16]}...): "
                         f"it is corrupt or was replaced; {_ADVICE}")
    return decode_group(data, group, path), entry, data


def load_group(location: str, group: int, version: str) -> GroupState:
    """Read ``version`` of ``group``.

    Raises
    ------
    StateError
        When the file is missing, truncated or corrupt; the message names the path and what to
        do.
    """
    path = version_path(location, group, version)
    meta, tables = read_snapshot(
        path, KIND, f"state of partition group {group} for version {version}", _ADVICE)
    if meta.get("group") != group or meta.get("version") != version:
        raise StateError(f"state file {path} holds group {meta.get('group')} version "
                         f"{meta.get('version')}; {_ADVICE}")
    return _state(tables)


def prune(location: str, committed: str, keep_older: int = KEEP_OLDER_VERSIONS) -> int:
    """Delete versions older than ``committed`` except the ``keep_older`` newest of them.

    Version names sort in batch order (see ``spark.offsets.version_id``). A pruned version's
    directory keeps the group files that a kept version's manifest still names (they hold the
    current state of groups that did not change since); its manifests and other files go, and
    the directory goes when nothing in it is named. Returns the number of directories deleted.
    Called on the driver from ``commit()``.
    """
    root = os.path.join(location, "versions")
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return 0
    older = [n for n in names if n < committed]
    doomed = older[: max(0, len(older) - keep_older)]
    if not doomed:
        return 0
    kept = (manifests.read_manifest(version_dir(location, n), n)
            for n in names if n not in doomed)
    needed = manifests.referenced(m for m in kept if m is not None)
    deleted = 0
    for name in doomed:
        directory = os.path.join(root, name)
        keep = {f"group-{g:04d}{SUFFIX}" for v, g in needed if v == name}
        if not keep:
            shutil.rmtree(directory)
            deleted += 1
            continue
        for entry in os.listdir(directory):
            if entry not in keep:
                os.unlink(os.path.join(directory, entry))
    return deleted
