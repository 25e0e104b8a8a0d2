"""One task's group state for one micro-batch: load version ``start``, commit version ``end``.

The :class:`~spark_stream_sched.runtime.query.batch.GroupStore` of the ``ordered-agg``
source's ``read()``, with Spark state-store semantics (docs/state_store.md):

* **load** ``start``: from the worker's :data:`~.group_cache.CACHE` when it holds exactly that
  version with the digest the version's manifest names and that file still exists (a lost
  checkpoint is an error now, not at the next cache miss), else from the checkpointed file the
  manifest names (or, for a version written by full rewrites, the version's own file);
* **commit** ``end``, incrementally: each group's new state is encoded
  (:func:`~.versions.encode_group`); a group whose bytes equal what was loaded keeps its file
  (the manifest points at the older version), a changed group gets a new file in ``end``'s
  directory; then the task's manifest (:mod:`~.manifests`) is written, and only then the new
  versions enter the cache (a task that fails before its manifest leaves nothing behind that a
  later batch could trust).

Replays are safe: a replayed batch loads the same ``start`` (the cache and the files agree,
checked by digest), computes the same states, rewrites the same files and manifests. Pure
Python: no pyspark.
"""

from __future__ import annotations

import os
from typing import Any

from spark_stream_sched.runtime.state import manifests, versions
from spark_stream_sched.runtime.state.atomic import atomic_write, fsync_dir
from spark_stream_sched.runtime.state.group_cache import CACHE, DEFAULT_BUDGET, GroupCache
from spark_stream_sched.runtime.state.manifests import Entry
from spark_stream_sched.runtime.state.versions import GroupState


class IncrementalGroupStore:
    """Group state of one task of one batch (see the module docstring).

    Parameters
    ----------
    location
        The query's ``stateLocation``.
    start
        Version the batch starts from (None: the initial, empty state).
    end
        Version the batch commits.
    task
        The Spark task (partition index): names its manifest.
    cache
        The worker's cache (None: no caching); its budget is set from ``cache_budget``
        (:data:`~.group_cache.DEFAULT_BUDGET` when None), so a small budget of an earlier
        query in the same worker does not stay in force.
    """

    def __init__(self, location: str, start: str | None, end: str, task: int,
                 cache: GroupCache | None = CACHE, cache_budget: int | None = None) -> None:
        self.location, self.start, self.end, self.task = location, start, end, task
        self.cache = cache
        if cache is not None:  # every query sets it: a budget never outlives its query
            cache.resize(DEFAULT_BUDGET if cache_budget is None else cache_budget)
        self._loaded: dict[int, Entry] = {}
        self._manifest: dict[int, Entry] | None = None
        self.metrics = {"state_files_written": 0, "state_files_unchanged": 0,
                        "state_bytes_written": 0, "state_cache_hits": 0,
                        "state_cache_misses": 0}

    def load(self, group: int) -> GroupState:
        """State of ``group`` at ``start`` (empty before the first batch)."""
        if self.start is None:
            return GroupState()
        entry = self._entry(group)
        where = None if entry is None else versions.version_path(self.location, group,
                                                                  entry.version)
        # the checkpointed file must still exist and be the file that was cached (size and
        # mtime): a lost or damaged checkpoint is reported now, not at the next cache miss
        stamp = file_stamp(where) if where is not None else None
        if entry is not None and where is not None and self.cache is not None and (
                stamp is not None):
            data = self.cache.get(self.location, group, self.start, entry.digest, stamp)
            self.metrics["state_cache_hits" if data is not None else "state_cache_misses"] += 1
            if data is not None:
                self._loaded[group] = entry
                return versions.decode_group(data, group, f"{where} (cached)")
        state, entry, data = versions.load_entry(self.location, group, self.start)
        if entry is not None and data is not None:
            self._loaded[group] = entry
            if self.cache is not None and where is not None:
                self.cache.put(self.location, group, self.start, entry.digest, data,
                               file_stamp(where))
        return state

    def _entry(self, group: int) -> Entry | None:
        """``group``'s manifest entry at ``start`` (None: ``start`` has no manifests)."""
        if self._manifest is None:
            assert self.start is not None
            found = manifests.read_manifest(versions.version_dir(self.location, self.start),
                                            self.start)
            self._manifest = found if found is not None else {}
        return self._manifest.get(group)

    def save(self, states: dict[int, GroupState], meta: dict[str, Any]) -> None:
        """Commit the groups' states as version ``end`` (changed groups only; then manifest).

        ``meta`` (e.g. the ready bound) is not stored in the incremental files: equal states
        must give equal bytes.
        """
        directory = versions.version_dir(self.location, self.end)
        created = not os.path.isdir(directory)
        entries: dict[int, Entry] = {}
        fresh: dict[int, tuple[str, bytes, str]] = {}
        for group, state in sorted(states.items()):
            data = versions.encode_group(group, state)
            digest = versions.digest_of(data)
            before = self._loaded.get(group)
            if before is not None and before.digest == digest:
                entries[group] = before
                path = versions.version_path(self.location, group, before.version)
                self.metrics["state_files_unchanged"] += 1
            else:
                path = versions.version_path(self.location, group, self.end)
                atomic_write(path, data, sync_dir=False)
                entries[group] = Entry(self.end, digest)
                self.metrics["state_files_written"] += 1
                self.metrics["state_bytes_written"] += len(data)
            fresh[group] = (digest, data, path)
        os.makedirs(directory, exist_ok=True)
        fsync_dir(directory)  # the group files are durable before the manifest names them
        if created:
            fsync_dir(os.path.dirname(directory))
        manifests.write_manifest(directory, self.end, self.task, entries)
        if self.cache is not None:
            for group, (digest, data, path) in fresh.items():
                self.cache.put(self.location, group, self.end, digest, data, file_stamp(path))


def file_stamp(path: str) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of ``path``, or None when it does not exist."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns
