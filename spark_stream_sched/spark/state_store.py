"""Versioned per-partition-group state of the ``ordered-agg`` source under ``stateLocation``.

Layout (Spark state-store semantics: load version v, write v+1, keep the last few)::

    <stateLocation>/
      _query.json                  query definition fixed at first start (partition groups, ...)
      versions/
        000000000051200-1f0c...e2/      state after the batch that ended at the offset named by
          group-0000.state              spark.offsets.version_id(); one file per partition group
          group-0003.state

A version file is a runtime snapshot (``runtime/snapshot.py``: magic, format version, SHA-256,
Arrow IPC — never pickle) of kind ``"ordered-agg-group"`` holding the group's rows that are not
ready yet (``pending``) and the window operator's own snapshot bytes (``window``). Files are
written to a temporary name, fsync'ed and renamed, so a crash never leaves a half-written
version under its final name. Pure Python: no pyspark.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import ConfigError, SpillError, StateError
from spark_stream_sched.runtime import snapshot

log = logging.getLogger(__name__)

KIND = "ordered-agg-group"
QUERY_FILE = "_query.json"
SUFFIX = ".state"
#: Versions kept per group before the committed one (for replays and inspection).
KEEP_OLDER_VERSIONS = 2
#: Fields of the query definition that may never change for one stateLocation.
FIXED_FIELDS = ("partition_groups", "n_inputs", "timestamp_column", "key_columns",
                "window_ms", "slide_ms", "aggregates")


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


def fsync_dir(directory: str) -> None:
    """Make renames and new entries in ``directory`` durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write(path: str, data: bytes, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically: temporary file, fsync, rename, fsync directory.

    With ``sync_dir=False`` the caller fsyncs the directory once after several writes. On any
    failure the temporary file is removed and ``path`` is untouched; an ``OSError`` (e.g. a
    full disk) becomes a :class:`~spark_stream_sched.errors.SpillError` naming ``path``.
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, StateError):
            raise SpillError(f"cannot write {path} ({len(data)} bytes): {exc.strerror or exc}; "
                             f"nothing was committed — free space on that file system (or fix "
                             f"its permissions) and restart the query from its checkpoint"
                             ) from exc
        raise
    if sync_dir:
        fsync_dir(directory)


def record_query(location: str, definition: dict[str, Any]) -> None:
    """Record the query definition at first start; refuse a changed one later.

    Raises
    ------
    ConfigError
        When a fixed field (e.g. ``partitionGroups``) differs from the recorded one.

    Notes
    -----
    Called on the driver (``streamReader()``), so the refusal happens at ``start()``.
    """
    path = os.path.join(location, QUERY_FILE)
    if not os.path.exists(path):
        atomic_write(path, json.dumps(definition, indent=1).encode())
        return
    try:
        with open(path, encoding="utf-8") as fh:
            recorded = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise StateError(f"cannot read {path}: {exc}; restore the file or use a new "
                         f"stateLocation and checkpointLocation") from exc
    for name in FIXED_FIELDS:
        if recorded.get(name) != definition.get(name):
            option = "partitionGroups" if name == "partition_groups" else name
            raise ConfigError(
                f"{option} is {definition.get(name)!r} but the query under stateLocation "
                f"{location!r} was started with {recorded.get(name)!r}; it is fixed when the "
                f"query first starts — set it back, or start a new query with a fresh "
                f"stateLocation and checkpointLocation")


def save_groups(location: str, version: str, states: dict[int, GroupState],
                meta: dict[str, Any]) -> None:
    """Write ``states`` (group -> state) as ``version``.

    One atomic file per group, then a single fsync of the version directory.
    """
    directory = version_dir(location, version)
    created = not os.path.isdir(directory)
    for group, state in states.items():
        tables: dict[str, pa.Table] = {}
        if state.pending is not None:
            tables["pending"] = state.pending
        if state.window is not None:
            tables["window"] = pa.table({"snapshot": pa.array([state.window], pa.binary())})
        data = snapshot.encode(KIND, {**meta, "group": group, "version": version}, tables)
        atomic_write(version_path(location, group, version), data, sync_dir=False)
    fsync_dir(directory)
    if created:
        fsync_dir(os.path.dirname(directory))


def load_group(location: str, group: int, version: str) -> GroupState:
    """Read ``version`` of ``group``.

    Raises
    ------
    StateError
        When the file is missing or corrupt; the message names the path and what to do.
    """
    path = version_path(location, group, version)
    advice = ("the stateLocation does not match the checkpointLocation (restore the state "
              "directory, or restart the query with a fresh checkpointLocation and a fresh "
              "stateLocation)")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise StateError(f"state of partition group {group} for version {version} is missing: "
                         f"{path}; {advice}") from None
    try:
        meta, tables = snapshot.decode(data, KIND)
    except StateError as exc:
        raise StateError(f"state file {path} is corrupt ({exc}); {advice}") from exc
    if meta.get("group") != group or meta.get("version") != version:
        raise StateError(f"state file {path} holds group {meta.get('group')} version "
                         f"{meta.get('version')}; {advice}")
    window = tables["window"].column(0)[0].as_py() if "window" in tables else None
    return GroupState(tables.get("pending"), window)


def prune(location: str, committed: str, keep_older: int = KEEP_OLDER_VERSIONS) -> int:
    """Delete versions older than ``committed`` except the ``keep_older`` newest of them.

    Version names sort in batch order (see ``spark.offsets.version_id``). Returns the number of
    versions deleted. Called on the driver from ``commit()``.
    """
    root = os.path.join(location, "versions")
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return 0
    older = [n for n in names if n < committed]
    doomed = older[: max(0, len(older) - keep_older)]
    for name in doomed:
        shutil.rmtree(os.path.join(root, name))
    return len(doomed)
