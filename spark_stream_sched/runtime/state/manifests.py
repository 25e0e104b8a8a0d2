"""Per-version manifests of the source's group state: where each group's current file is.

With incremental writes (:mod:`~.group_store`) a micro-batch writes a new state file only for
the partition groups whose state changed; every other group's current state is the file of an
earlier version. Each task of the batch therefore writes, after its group files, a manifest
naming for each of its groups the version directory holding its file and that file's SHA-256
(the snapshot's own trailing digest)::

    versions/000000000051200-1f0c...e2/
      group-0003.state                 changed in this batch
      _manifest-task-0000.json         {"3": ["000000000051200-1f0c...e2", "9c1e..."],
                                        "4": ["000000000049800-77ab...01", "5d02..."], ...}
      _manifest-task-0001.json

A version's manifest is the union of its task manifests: every group of the query appears in
exactly one (the recorded assignment gives each group one task). A version directory without
any manifest was written by full rewrites (before this layout): each group's file is in it.

The manifests are also what keeps pruning correct: a version directory that is old enough to be
pruned keeps the group files that a kept version's manifest still names
(:func:`~.versions.prune`). Checksummed JSON (:func:`~.records.seal`), written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.records import read_record, seal

FORMAT = "ordered-agg-manifest"
FORMAT_VERSION = 1
PREFIX = "_manifest-task-"
_ADVICE = ("the state directory was changed while the query ran; restore it, or restart the "
           "query with a fresh checkpointLocation and stateLocation")


@dataclass(frozen=True)
class Entry:
    """Where one group's state of a version is: ``versions/<version>/group-NNNN.state``."""

    version: str
    digest: str


def manifest_path(directory: str, task: int) -> str:
    """Manifest of task ``task`` in a version directory."""
    return os.path.join(directory, f"{PREFIX}{task:04d}.json")


def write_manifest(directory: str, version: str, task: int, entries: Mapping[int, Entry]) -> None:
    """Write task ``task``'s manifest of ``version`` (after its group files)."""
    groups = {str(g): [e.version, e.digest] for g, e in sorted(entries.items())}
    record = {"format": FORMAT, "format_version": FORMAT_VERSION, "version": version,
              "task": task, "groups": groups}
    atomic_write(manifest_path(directory, task), seal(record))


def read_manifest(directory: str, version: str) -> dict[int, Entry] | None:
    """The union of the task manifests of ``version``; None when it has none (or no directory).

    Raises
    ------
    StateError
        A manifest that is corrupt, of another version, or that names a group differently from
        another manifest of the same version.
    """
    try:
        names = sorted(n for n in os.listdir(directory)
                       if n.startswith(PREFIX) and n.endswith(".json"))
    except FileNotFoundError:
        return None
    if not names:
        return None
    merged: dict[int, Entry] = {}
    for name in names:
        path = os.path.join(directory, name)
        record = read_record(path, "state manifest", _ADVICE)
        if record.get("format") != FORMAT or record.get("version") != version:
            raise StateError(f"state manifest {path} is not a manifest of version {version}; "
                             f"{_ADVICE}")
        for key, (where, digest) in dict(record["groups"]).items():
            entry = Entry(str(where), str(digest))
            if merged.setdefault(int(key), entry) != entry:
                raise StateError(f"state manifests of version {version} disagree about "
                                 f"partition group {key} ({path}); {_ADVICE}")
    return merged


def remove_manifests(directory: str) -> None:
    """Delete the manifests of a version directory (its batch is planned again, or pruned)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(PREFIX):
            os.unlink(os.path.join(directory, name))


def referenced(manifests: Iterable[Mapping[int, Entry]]) -> set[tuple[str, int]]:
    """``(version, group)`` of every file the given manifests name."""
    return {(e.version, g) for m in manifests for g, e in m.items()}
