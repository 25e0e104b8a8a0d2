"""Partition-group state as files on a shared file system: the source's and the sink's layout.

The :class:`~.store.StateStore` backend both the ``ordered-agg`` source and sink write
(docs/state_store.md maps it onto Spark's state store)::

    <stateLocation>/versions/
      000000000051200-1f0c...e2/             one directory per committed version; names sort in
        group-0003.t0001.state               batch order (the source's offset version ids, the
        _manifest-t0001.json                 sink's batch-<id>)
        _manifest-t0000.json
      batch-000000000012/
        group-0007.t00003a0-5e1f09c2.state   written by a sink write task ...
        group-0007.driver.state              ... and again by the commit's catch-up
        _manifest-driver.json

* a **group file** is :func:`~.store.encode_group`'s snapshot (magic, format version, SHA-256,
  Arrow IPC -- never pickle), named by its group and its writer (several writers can put one
  group into one version: a sink task, then the commit's catch-up). A group whose state did not
  change keeps the file of an older version; an empty group has no file;
* a **manifest** (checksummed JSON, :mod:`~.records`) is one writer's commit of a version:
  per partition group, ``[version, sha256, file name, hold]`` of its state, or ``null`` when it
  is empty. A version is the union of its manifests; every group must be named exactly once
  (the source's tasks own disjoint groups and together all of them; the sink's driver names all
  groups), so a group no manifest names is missing state, an error naming the version.

Writes: each group file with :func:`~.atomic.atomic_write` (no directory fsync each), then one
fsync of the version directory, then the manifest -- a crash leaves at most files no manifest
names, which the next attempt of the batch rewrites and pruning deletes. Loads go through the
Python worker's :data:`~.group_cache.CACHE` when it holds exactly the entry's version and digest
and the file is still the one cached (size and mtime); otherwise the file is read and its
SHA-256 checked against the manifest. Pure Python: no pyspark.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write, fsync_dir, read_bytes
from spark_stream_sched.runtime.state.group_cache import CACHE, DEFAULT_BUDGET, GroupCache
from spark_stream_sched.runtime.state.records import read_record, seal
from spark_stream_sched.runtime.state.store import (
    CORRUPT_ADVICE,
    MISSING_ADVICE,
    Entry,
    GroupState,
    decode_group,
    digest_of,
    encode_group,
)

MANIFEST_FORMAT = "ordered-agg-manifest"
MANIFEST_VERSION = 2
MANIFEST_PREFIX = "_manifest-"
VERSIONS_DIR = "versions"


def version_dir(location: str, version: str) -> str:
    """Directory of one version."""
    return os.path.join(location, VERSIONS_DIR, version)


def group_file(group: int, writer: str) -> str:
    """Name of ``group``'s state file written by ``writer``."""
    return f"group-{group:04d}.{writer}.state"


def file_stamp(path: str) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of ``path``, or None when it does not exist."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns


class FileStateStore:
    """Versioned group state under ``location`` (see the module docstring).

    Parameters
    ----------
    location
        The query's state location, on a file system every executor and the driver share.
    cache
        The Python worker's cache of committed group state (None: no caching).
    cache_budget
        Bytes the cache may hold (the query's ``stateMemoryBudget``; default
        :data:`~.group_cache.DEFAULT_BUDGET`): set on every store, so a small budget of an
        earlier query in the same worker does not stay in force.
    """

    def __init__(self, location: str, cache: GroupCache | None = CACHE,
                 cache_budget: int | None = None) -> None:
        self.location = location
        self.cache = cache
        if cache is not None:
            cache.resize(DEFAULT_BUDGET if cache_budget is None else cache_budget)
        self.cache_hits = 0

    # -- load a version, read a group --------------------------------------------------------

    def entries(self, version: str, writers: Sequence[str] = ()) -> dict[int, Entry | None]:
        """The union of ``version``'s manifests (``writers``: manifests that must be there).

        Raises
        ------
        StateError
            The version has no manifest, or not one of ``writers`` (naming its path), a
            manifest is damaged or of another version, or two manifests name one group
            differently.
        """
        directory = version_dir(self.location, version)
        names = manifest_names(directory)
        for writer in writers:
            if manifest_name(writer) not in names:
                raise StateError(f"state version {version} is missing its manifest "
                                 f"{os.path.join(directory, manifest_name(writer))}; "
                                 f"{MISSING_ADVICE}")
        if not names:
            raise StateError(f"state version {version} is missing: {directory} holds no "
                             f"manifest, so this stateLocation does not hold the state the "
                             f"checkpoint's offsets refer to (it was deleted or damaged, or "
                             f"belongs to another checkpoint); restore it, or restart the query "
                             f"with a fresh checkpointLocation and stateLocation")
        merged: dict[int, Entry | None] = {}
        for name in names:
            for group, entry in read_manifest(os.path.join(directory, name), version).items():
                if group in merged and merged[group] != entry:
                    raise StateError(f"state manifests of version {version} disagree about "
                                     f"partition group {group} ({directory}); {MISSING_ADVICE}")
                merged[group] = entry
        return merged

    def get(self, group: int, entry: Entry | None) -> GroupState:
        """``group``'s state named by ``entry`` (empty for None), digest-checked."""
        if entry is None:
            return GroupState()
        path = os.path.join(version_dir(self.location, entry.version), entry.name)
        stamp = file_stamp(path)  # a lost file is reported now, not at the next cache miss
        if self.cache is not None and stamp is not None:
            data = self.cache.get(self.location, group, entry.version, entry.digest, stamp)
            if data is not None:
                self.cache_hits += 1
                return decode_group(data, group, path, CORRUPT_ADVICE, entry.hold)
        data = read_bytes(path, f"state of partition group {group}", MISSING_ADVICE)
        state = decode_group(data, group, path, CORRUPT_ADVICE, entry.hold)  # corrupt: says so
        if digest_of(data) != entry.digest:
            raise StateError(f"state file {path} is intact but is not the file the manifest of "
                             f"version {entry.version} names (SHA-256 {digest_of(data)[:16]}..., "
                             f"expected {entry.digest[:16]}...): it was replaced, e.g. by "
                             f"another query writing to this stateLocation or a restore from "
                             f"another backup; {MISSING_ADVICE}")
        if self.cache is not None:  # only what decoded and matched
            self.cache.put(self.location, group, entry.version, entry.digest, data, stamp)
        return state

    # -- put a group, commit a version -------------------------------------------------------

    def put(self, group: int, state: GroupState, version: str, writer: str,
            base: Entry | None) -> Entry | None:
        """Write ``group``'s state into ``version`` (see :meth:`StateStore.put`)."""
        if state.is_empty:
            return None
        data = encode_group(group, state)
        digest = digest_of(data)
        if base is not None and base.digest == digest:
            return Entry(base.version, base.digest, base.name, state.hold)
        name = group_file(group, writer)
        path = os.path.join(version_dir(self.location, version), name)
        atomic_write(path, data, sync_dir=False)
        if self.cache is not None:
            self.cache.put(self.location, group, version, digest, data, file_stamp(path))
        return Entry(version, digest, name, state.hold)

    def commit(self, version: str, writer: str, entries: Mapping[int, Entry | None]) -> None:
        """Make ``version``'s group files durable, then write ``writer``'s manifest."""
        directory = version_dir(self.location, version)
        created = not os.path.isdir(directory)
        os.makedirs(directory, exist_ok=True)
        fsync_dir(directory)  # the group files are durable before a manifest names them
        if created:
            fsync_dir(os.path.dirname(directory))
        groups = {str(g): None if e is None else [e.version, e.digest, e.name, e.hold]
                  for g, e in sorted(entries.items())}
        record = {"format": MANIFEST_FORMAT, "format_version": MANIFEST_VERSION,
                  "version": version, "writer": writer, "groups": groups}
        atomic_write(os.path.join(directory, manifest_name(writer)), seal(record))

    def forget(self, version: str) -> None:
        """Delete ``version``'s manifests (its batch is planned again: the writers rewrite)."""
        directory = version_dir(self.location, version)
        for name in manifest_names(directory):
            os.unlink(os.path.join(directory, name))

    # -- prune -------------------------------------------------------------------------------

    def versions(self) -> list[str]:
        """Every version directory, in batch order."""
        try:
            return sorted(os.listdir(os.path.join(self.location, VERSIONS_DIR)))
        except FileNotFoundError:
            return []

    def prune(self, committed: str, keep_older: int) -> int:
        """Delete versions older than ``committed`` except the ``keep_older`` newest of them.

        A pruned version keeps the group files a kept version's manifest still names (the
        current state of groups that did not change since); the rest of it goes, and its
        directory when nothing in it is named. Returns the directories deleted.
        """
        names = self.versions()
        older = [n for n in names if n < committed]
        doomed = older[: max(0, len(older) - keep_older)]
        if not doomed:
            return 0
        needed = referenced(self._manifests(n) for n in names if n not in doomed)
        deleted = 0
        for name in doomed:
            directory = version_dir(self.location, name)
            keep = {file for version, file in needed if version == name}
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
                deleted += 1
                continue
            for entry in os.listdir(directory):
                if entry not in keep:
                    os.unlink(os.path.join(directory, entry))
        return deleted

    def _manifests(self, version: str) -> dict[int, Entry | None]:
        """``version``'s entries for pruning ({} for a version nobody committed yet)."""
        directory = version_dir(self.location, version)
        return self.entries(version) if manifest_names(directory) else {}


def manifest_name(writer: str) -> str:
    """File name of ``writer``'s manifest."""
    return f"{MANIFEST_PREFIX}{writer}.json"


def manifest_names(directory: str) -> list[str]:
    """Manifest file names in a version directory ([] when it does not exist)."""
    try:
        return sorted(n for n in os.listdir(directory)
                      if n.startswith(MANIFEST_PREFIX) and n.endswith(".json"))
    except FileNotFoundError:
        return []


def read_manifest(path: str, version: str) -> dict[int, Entry | None]:
    """One manifest's entries (StateError naming it when damaged or of another version)."""
    record = read_record(path, "state manifest", CORRUPT_ADVICE)
    if (record.get("format") != MANIFEST_FORMAT or record.get("version") != version
            or record.get("format_version") != MANIFEST_VERSION):
        raise StateError(f"state manifest {path} is not a manifest of version {version} in "
                         f"format {MANIFEST_VERSION}; {MISSING_ADVICE}")
    out: dict[int, Entry | None] = {}
    for key, value in dict(record["groups"]).items():
        out[int(key)] = None if value is None else Entry(str(value[0]), str(value[1]),
                                                         str(value[2]), value[3])
    return out


def referenced(manifests: Iterable[Mapping[int, Entry | None]]) -> set[tuple[str, str]]:
    """``(version, file name)`` of every file the given entries name."""
    return {(e.version, e.name) for m in manifests for e in m.values() if e is not None}
