"""Recorded group -> task assignments of the ``ordered-agg`` source, one per state version.

Distributed adaptation (Liu & Rundensteiner 2005, §5-§6) moves partition groups between Spark tasks
at micro-batch boundaries. Which task ran which group, and which groups were pushed to disk, changes
what is emitted when (a pushed join group emits its missing results later, at its clean-up), so a
batch that Spark replays after a driver crash must run with *exactly* the assignment of its first
attempt. The driver therefore writes the assignment, before any task of the batch runs, to a
checksummed JSON file keyed by the state version the batch's end offset names
(``spark.offsets.version_id``)::

    <stateLocation>/assignments/000000000051200-1f0c...e2.json

and ``partitions()`` reuses an existing file instead of planning again. The file holds the
decision *and* what it was computed from (the groups' loads), so a reader can check it by hand.
Pure Python: no pyspark; written with :func:`~.atomic.atomic_write` and :func:`~.records.seal`
(never pickle).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.records import read_record, seal

FORMAT = "ordered-agg-assignment"
FORMAT_VERSION = 1
ASSIGNMENT_DIR = "assignments"
#: Records kept before the committed one by default (option ``keepMetrics``: history for
#: reports; a replay needs only the committed version's record and newer ones).
KEEP_OLDER = 1000
_ADVICE = ("delete the file to let the driver plan the batch again (the output of that batch "
           "may then differ in order if groups were pushed to disk), or restore it")


@dataclass(frozen=True)
class Assignment:
    """Which task runs each partition group in one micro-batch, and which groups are pushed.

    Attributes
    ----------
    version
        State version the batch ends at (the record's key).
    tasks
        Number of Spark tasks of the batch.
    groups
        ``groups[g]`` is the task that runs partition group ``g``.
    pushes
        Groups whose join state the task pushes to disk before the batch's rows (Liu & Rundensteiner
        2005, §4.3).
    produced
        ``P_o`` of each group: results produced before this batch (from recorded metrics).
    loads
        ``[group, task, P_s, P_o, spilled]`` rows the plan was computed from (empty: none).
    moves
        ``[group, source task, target task, bytes]`` of the groups moved at this boundary.
    active_pushed
        Bytes pushed by active-disk plans so far (Liu & Rundensteiner 2005, §6, bounded by ``M_q -
        M_c``).
    reason
        Why the plan is what it is (thresholds, ratios), for logs and reports.
    """

    version: str
    tasks: int
    groups: tuple[int, ...]
    pushes: tuple[int, ...] = ()
    produced: tuple[int, ...] = ()
    loads: tuple[tuple[int, int, int, int, int], ...] = ()
    moves: tuple[tuple[int, int, int, int], ...] = ()
    active_pushed: int = 0
    reason: str = ""

    def groups_of(self, task: int) -> tuple[int, ...]:
        """Partition groups run by ``task``, ascending."""
        return tuple(g for g, t in enumerate(self.groups) if t == task)

    @property
    def moved_bytes(self) -> int:
        """Bytes of state moved between tasks at this boundary."""
        return sum(m[3] for m in self.moves)

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values (fixed key order)."""
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "version": self.version,
                "tasks": self.tasks, "groups": list(self.groups), "pushes": list(self.pushes),
                "produced": list(self.produced), "loads": [list(x) for x in self.loads],
                "moves": [list(m) for m in self.moves], "active_pushed": self.active_pushed,
                "reason": self.reason}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Assignment:
        """Inverse of :meth:`to_json` (ValueError/KeyError/TypeError on a malformed record)."""
        if raw["format"] != FORMAT or raw["format_version"] != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} record of format version {FORMAT_VERSION}")
        groups = tuple(int(t) for t in raw["groups"])
        tasks = int(raw["tasks"])
        if tasks < 1 or any(not 0 <= t < tasks for t in groups):
            raise ValueError(f"a group is assigned to a task outside 0..{tasks - 1}")
        loads = tuple((int(a), int(b), int(c), int(d), int(e)) for a, b, c, d, e in raw["loads"])
        moves = tuple((int(a), int(b), int(c), int(d)) for a, b, c, d in raw["moves"])
        return cls(str(raw["version"]), tasks, groups, _ints(raw["pushes"]),
                   _ints(raw["produced"]), loads, moves, int(raw["active_pushed"]),
                   str(raw["reason"]))


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def record_dir(location: str) -> str:
    """``<stateLocation>/assignments``."""
    return os.path.join(location, ASSIGNMENT_DIR)


def record_path(location: str, version: str) -> str:
    """File of the assignment of the batch that ends at state ``version``."""
    return os.path.join(record_dir(location), f"{version}.json")


def write_assignment(location: str, assignment: Assignment) -> None:
    """Write the record durably (atomic rename, fsync); called on the driver."""
    atomic_write(record_path(location, assignment.version), seal(assignment.to_json(), indent=1))


def read_assignment(location: str, version: str) -> Assignment | None:
    """The recorded assignment of ``version``, or None when it has none.

    Raises
    ------
    StateError
        When the file exists but is corrupt, truncated or not a record of this version.
    """
    path = record_path(location, version)
    if not os.path.exists(path):
        return None
    raw = read_record(path, "the recorded group assignment", _ADVICE)
    try:
        assignment = Assignment.from_json(raw)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"the recorded group assignment {path} is malformed ({exc}); "
                         f"{_ADVICE}") from exc
    if assignment.version != version:
        raise StateError(f"the recorded group assignment {path} is for version "
                         f"{assignment.version}; {_ADVICE}")
    return assignment


def recorded_versions(location: str) -> list[str]:
    """Versions that have a record, ascending (= batch order)."""
    try:
        names = os.listdir(record_dir(location))
    except FileNotFoundError:
        return []
    return sorted(n[: -len(".json")] for n in names if n.endswith(".json")
                  and not n.startswith("."))


def prune(location: str, committed: str, keep_older: int = KEEP_OLDER) -> int:
    """Delete records older than ``committed`` except the ``keep_older`` newest of them.

    The record of the committed version is kept: the next batch starts from it. Returns the
    number of records deleted. Called on the driver from ``commit()``.
    """
    older = [v for v in recorded_versions(location) if v < committed]
    doomed = older[: max(0, len(older) - keep_older)]
    for version in doomed:
        os.unlink(record_path(location, version))
    return len(doomed)
