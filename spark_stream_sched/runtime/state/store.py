"""The one state store interface: partition-group state, one committed version after another.

A *partition group* (Liu & Rundensteiner, *Adapting State-Intensive Non-Blocking Queries over
Distributed Environments*, §3-§4) is the unit of state: every door of the engine keeps, per
group, the rows not ready yet and the group operator's snapshot (:class:`GroupState`). A
micro-batch moves a set of groups from the version its batch started from to the version it
commits, with Spark's state-store semantics: load version ``v``, write ``v + 1``, keep the last
few, prune older ones.

Two levels:

* :class:`StateStore` -- a versioned store (*load a version*, *read / put / delete a group*,
  *commit a version*, *prune*). Backends: files on a file system shared by the driver and the
  executors (:class:`~.files.FileStateStore`, the source's and the sink's one layout) and memory
  (:class:`~.memory.MemoryStateStore`, batch reads and tests).
* :class:`GroupStore` -- what one run of :class:`~spark_stream_sched.runtime.engine.batch.
  GroupedBatch` needs: the state of each of its groups at the batch's start, and where to put
  their new states. :class:`BatchStore` is that view over any :class:`StateStore`; the
  ``ordered()`` transformation's processor implements it over Spark's own state store (Spark
  versions, commits and prunes it).

An empty state (nothing pending, no operator state) is *deleted*: its entry is ``None`` and no
file holds it, so a store's size follows the groups that hold something. Every committed version
still names every partition group (an entry or ``None``): a group a version does not name at all
is missing state (a lost manifest or a damaged directory), which is an error, never "empty".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.snapshot import decode, encode

#: Snapshot kind of one group's state.
KIND = "ordered-agg-group"
#: What to do about a state file that is corrupt (truncated, a flipped byte): the file is named
#: first, the cause is the file, not the checkpoint.
CORRUPT_ADVICE = ("restore the file from a backup of the stateLocation and restart the query; "
                  "without one, start the query with a new checkpointLocation and "
                  "stateLocation, which recomputes every result from the inputs")
MISSING_ADVICE = ("the state directory was changed or damaged while the query ran; restore it, "
                  "or restart the query with a fresh checkpointLocation and stateLocation")


@dataclass
class GroupState:
    """State of one partition group between two micro-batches.

    ``pending``: rows not ready yet (with ``__input``/``__seq``); ``window``: the group
    operator's snapshot bytes; ``hold``: the least event time a result still missing from the
    group's join stages can have (``H``, see
    :mod:`~spark_stream_sched.runtime.keyed.join_hold`; None: nothing is missing). ``hold`` is a
    function of ``window`` kept beside it (in the version's manifest), so that the query's least
    ``H`` is known without decoding every group.
    """

    pending: pa.Table | None = None
    window: bytes | None = None
    hold: int | None = None

    @property
    def is_empty(self) -> bool:
        """Nothing pending and no operator state: the group is stored as absent."""
        return (self.pending is None or self.pending.num_rows == 0) and self.window is None


@dataclass(frozen=True)
class Entry:
    """Where one group's state of a version is: ``name`` in version directory ``version``."""

    version: str
    digest: str
    name: str
    hold: int | None = None


class GroupStore(Protocol):
    """One batch's group state: the start version in, the batch's new states out."""

    def load(self, group: int) -> GroupState:
        """State of ``group`` at the batch's start (empty before the first batch)."""

    def save(self, states: Mapping[int, GroupState]) -> None:
        """Put the groups' states at the batch's end (an empty state deletes the group)."""


class StateStore(Protocol):
    """A versioned store of partition-group state (see the module docstring)."""

    def entries(self, version: str, writers: Sequence[str] = ()) -> dict[int, Entry | None]:
        """Load a version: where each group's state of ``version`` is (None: empty).

        ``writers``: writers whose commit the version must hold (StateError otherwise).
        """

    def get(self, group: int, entry: Entry | None) -> GroupState:
        """Read a group's state (empty for None); StateError naming it when damaged."""

    def put(self, group: int, state: GroupState, version: str, writer: str,
            base: Entry | None) -> Entry | None:
        """Write a group's state into ``version``; None when it is empty (deleted).

        ``base``: the entry the state was loaded from; a state equal to it keeps that entry.
        ``writer`` tells apart the files several writers put into one version.
        """

    def commit(self, version: str, writer: str, entries: Mapping[int, Entry | None]) -> None:
        """Commit ``writer``'s part of ``version``: the entries of its groups."""

    def prune(self, committed: str, keep_older: int) -> int:
        """Delete versions older than ``committed`` but the ``keep_older`` newest of them."""


# -- one encoding of a group's state ------------------------------------------------------------


def encode_group(group: int, state: GroupState) -> bytes:
    """Snapshot bytes of one group's state; equal states give equal bytes.

    The metadata holds only the group id, so the trailing SHA-256 (:func:`digest_of`) tells
    whether a group changed in a batch.
    """
    tables: dict[str, pa.Table] = {}
    if state.pending is not None:
        tables["pending"] = state.pending
    if state.window is not None:
        tables["window"] = pa.table({"snapshot": pa.array([state.window], pa.binary())})
    return encode(KIND, {"group": group}, tables)


def decode_group(data: bytes, group: int, where: str, advice: str,
                 hold: int | None = None) -> GroupState:
    """Inverse of :func:`encode_group` (StateError naming ``where`` if corrupt or misplaced)."""
    try:
        meta, tables = decode(data, KIND)
    except StateError as exc:
        raise StateError(f"state file {where} is corrupt ({exc}): partition group {group} "
                         f"cannot be loaded; {advice}") from exc
    if meta.get("group") != group:
        raise StateError(f"state in {where} holds partition group {meta.get('group')}, not "
                         f"{group}; {advice}")
    window = tables["window"].column(0)[0].as_py() if "window" in tables else None
    return GroupState(tables.get("pending"), window, hold)


def digest_of(data: bytes) -> str:
    """Hex SHA-256 that ends snapshot bytes (the digest of everything before it)."""
    return data[-32:].hex()


# -- the batch view over any versioned store ---------------------------------------------------


@dataclass
class BatchStore:
    """:class:`GroupStore` of one batch over a :class:`StateStore`.

    Loads from ``start`` (the entries of the version the batch starts from; None before the
    first batch: every group empty) and puts the new states into version ``end`` as ``writer``;
    with ``commit`` True it then commits them (a source task); otherwise the caller commits
    :attr:`written` later (a sink task's entries reach the driver in its commit message).
    ``where`` names the start version in errors.
    """

    store: StateStore
    start: Mapping[int, Entry | None] | None
    end: str
    writer: str
    commit: bool = True
    where: str = "the start version"
    written: dict[int, Entry | None] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=lambda: {
        "state_files_written": 0, "state_files_unchanged": 0, "state_groups_deleted": 0})

    def load(self, group: int) -> GroupState:
        """State of ``group`` at ``start`` (StateError when the version does not name it)."""
        if self.start is None:
            return GroupState()
        if group not in self.start:
            raise StateError(f"state of partition group {group} is missing: {self.where} does "
                             f"not name it; {MISSING_ADVICE}")
        return self.store.get(group, self.start[group])

    def save(self, states: Mapping[int, GroupState]) -> None:
        """Put every state into ``end``; commit them when :attr:`commit` is set."""
        for group, state in sorted(states.items()):
            base = self.start.get(group) if self.start is not None else None
            entry = self.store.put(group, state, self.end, self.writer, base)
            self.written[group] = entry
            if entry is None:
                self.metrics["state_groups_deleted"] += 1
            elif base is not None and entry.version == base.version:
                self.metrics["state_files_unchanged"] += 1
            else:
                self.metrics["state_files_written"] += 1
        if self.commit:
            self.store.commit(self.end, self.writer, self.written)
