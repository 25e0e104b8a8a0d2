"""Partition-group state in memory: the :class:`~.store.StateStore` of batch reads and tests.

A batch read (``spark.read.format("ordered-agg")``) runs one pass from empty state to the end of
every input, so its state never outlives the task; this backend keeps it in a dictionary with
the same semantics as the file backend (versions, one entry per group, empty groups deleted,
pruning), so the engine runs the same code over either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.store import MISSING_ADVICE, Entry, GroupState


class MemoryStateStore:
    """Versions of group state held in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._states: dict[tuple[str, int], GroupState] = {}
        self._versions: dict[str, dict[int, Entry | None]] = {}
        self._writers: dict[str, set[str]] = {}

    def entries(self, version: str, writers: Sequence[str] = ()) -> dict[int, Entry | None]:
        """Every committed writer's entries of ``version`` (StateError when never committed)."""
        missing = set(writers) - self._writers.get(version, set())
        if version not in self._versions or missing:
            raise StateError(f"state version {version} is missing (writers "
                             f"{sorted(missing)}); {MISSING_ADVICE}")
        return dict(self._versions[version])

    def get(self, group: int, entry: Entry | None) -> GroupState:
        """The state ``entry`` names (empty for None)."""
        if entry is None:
            return GroupState()
        state = self._states[(entry.version, group)]
        return GroupState(state.pending, state.window, entry.hold)

    def put(self, group: int, state: GroupState, version: str, writer: str,
            base: Entry | None) -> Entry | None:
        """Keep ``state`` as ``group``'s state in ``version`` (None: empty, deleted)."""
        if state.is_empty:
            return None
        self._states[(version, group)] = state
        return Entry(version, "", writer, state.hold)

    def commit(self, version: str, writer: str, entries: Mapping[int, Entry | None]) -> None:
        """Record ``writer``'s entries of ``version``."""
        self._versions.setdefault(version, {}).update(entries)
        self._writers.setdefault(version, set()).add(writer)

    def prune(self, committed: str, keep_older: int) -> int:
        """Forget versions older than ``committed`` but the ``keep_older`` newest."""
        older = sorted(v for v in self._versions if v < committed)
        doomed = older[: max(0, len(older) - keep_older)]
        needed = {(e.version, g) for v in self._versions if v not in doomed
                  for g, e in self._versions[v].items() if e is not None}
        for version in doomed:
            del self._versions[version]
        for key in [k for k in self._states if k[0] in doomed and k not in needed]:
            del self._states[key]
        return len(doomed)
