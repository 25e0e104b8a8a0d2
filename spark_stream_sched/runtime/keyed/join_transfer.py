"""Moving one partition group's join state between join instances.

See Liu & Rundensteiner (2005), §5.1, fig. 13.

Distributed adaptation moves whole partition groups -- the stored tuples of every input for one
partition id, with their statistics -- from the *sender* to the *receiver*, so that every later
tuple of the group is joined on the receiver alone (§5.1: moving ``(A_1, B_1, C_1)`` together
avoids a cross-machine join). :class:`GroupState` is what travels: the memory part, the
generations on disk (read back, checksum-verified; lazy-disk never moves such groups, but the
transfer is exact either way), ``P_o`` and ``T_u``.

Contract (what makes the move exact): the group's tuples are routed to exactly one instance at
a time, and the move happens between two updates (the micro-batch boundary is the barrier that
replaces steps 3-8 of fig. 13: no tuple of the group is in flight). Then the receiver holds
exactly the sender's epochs, so its later probes and its clean-up (Eq. 1) produce exactly the
results the sender would have produced: no duplicate, no loss.

:func:`encode_group` / :func:`decode_group` give the checksummed bytes of a state (the snapshot
format, never pickle), for moving it between processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.keyed.join_match import MS, column
from spark_stream_sched.runtime.keyed.join_spec import route
from spark_stream_sched.runtime.keyed.join_state import (
    JoinCounts,
    PartitionGroup,
    SpillStore,
    arrow_bytes,
    fresh,
)
from spark_stream_sched.runtime.state.snapshot import decode, encode

#: Snapshot kind of an encoded group state.
GROUP_KIND = "keyed.join.group"


@dataclass(frozen=True)
class GroupState:
    """One partition group's whole join state, detached from any instance.

    Attributes
    ----------
    gid
        Partition-group id (the same in every instance with the same ``n_groups``).
    memory
        Memory-resident stored tuples, in the total order.
    generations
        ``(tuples, max_ms)`` of every generation pushed to disk, in push order.
    produced
        ``P_o``: results produced so far.
    last_insert
        ``T_u``: event time of the last inserted tuple (None: none yet).
    """

    gid: int
    memory: pa.Table
    generations: tuple[tuple[pa.Table, int], ...]
    produced: int
    last_insert: int | None

    @property
    def size(self) -> int:
        """``P_s``: bytes of the memory part (as :attr:`PartitionGroup.size` counts them)."""
        return arrow_bytes(self.memory) if self.memory.num_rows else 0


def take_state(group: PartitionGroup, spill: SpillStore, schema: pa.Schema) -> GroupState:
    """Detach ``group``'s state (generation files are read, then deleted); leave it empty."""
    generations = tuple((spill.read(g, schema), g.max_ms) for g in group.generations)
    state = GroupState(group.gid, group.memory, generations, group.produced, group.last_insert)
    for generation in group.generations:
        spill.delete(generation)
    group.generations, group.produced, group.last_insert = [], 0, None
    group.memory = schema.empty_table()
    return state


def give_state(group: PartitionGroup, spill: SpillStore, schema: pa.Schema,
               state: GroupState) -> None:
    """Install ``state`` into the empty ``group`` (generations re-written to ``spill``).

    Raises
    ------
    StateError
        If the ids differ, ``group`` already holds state (tuples, generations or results: the
        group was routed to two instances), or the tuples have another schema.
    """
    if state.gid != group.gid:
        raise StateError(f"state of partition group {state.gid} cannot replace group "
                         f"{group.gid}")
    if group.memory.num_rows or group.generations or group.produced:
        raise StateError(f"partition group {group.gid} already holds state here; a group must "
                         f"be routed to one instance at a time (take it from the other first)")
    tables = [state.memory, *(t for t, _ in state.generations)]
    if not all(t.schema.equals(schema) for t in tables):
        raise StateError(f"state of partition group {group.gid} has another schema than this "
                         f"join's stored tuples; both instances must run the same query")
    group.memory = state.memory
    group.produced, group.last_insert = state.produced, state.last_insert
    group.generations = [spill.write(group.gid, t, m) for t, m in state.generations]


def encode_group(state: GroupState) -> bytes:
    """Checksummed snapshot bytes of ``state`` (no pickle)."""
    meta = {"gid": state.gid, "produced": state.produced, "last_insert": state.last_insert,
            "generations": [[t.num_rows, m] for t, m in state.generations]}
    spilled = pa.concat_tables([state.memory.schema.empty_table(),
                                *(t for t, _ in state.generations)])
    return encode(GROUP_KIND, meta, {"memory": state.memory, "spilled": spilled})


def decode_group(data: bytes) -> GroupState:
    """Inverse of :func:`encode_group` (StateError if corrupt or of another kind)."""
    meta, tables = decode(data, GROUP_KIND)
    try:
        spilled, at, generations = tables["spilled"], 0, []
        for rows, max_ms in meta["generations"]:
            generations.append((fresh(spilled.slice(at, int(rows))), int(max_ms)))
            at += int(rows)
        return GroupState(int(meta["gid"]), fresh(tables["memory"]), tuple(generations),
                          int(meta["produced"]), meta["last_insert"])
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"encoded partition group does not match its format ({exc})") from exc


class GroupTransfer:
    """The join's hooks for adaptation: route, detach, install, push.

    Liu & Rundensteiner (2005), §4.3, §5.1.


    A mixin of :class:`~.join.Join`, which provides the attributes below.
    """

    key_columns: list[str]
    n_groups: int
    ordered: bool
    _groups: list[PartitionGroup]
    _spill: SpillStore
    _stored: pa.Schema
    _empty: pa.Table
    _where: str
    _now: int | None
    _bound: int | None
    counts: JoinCounts

    def group_of(self, rows: pa.Table) -> np.ndarray:
        """Partition group of each row (-1: a null key); the router (§3.1 *split*) uses it."""
        _, valid, groups = route(rows, self.key_columns, self.n_groups)
        return np.where(valid, groups, -1)

    def take_group(self, gid: int) -> GroupState:
        """Detach group ``gid``'s state between updates (:mod:`.join_transfer`); left empty."""
        return take_state(self._groups[self._gid(gid)], self._spill, self._stored)

    def give_group(self, state: GroupState) -> None:
        """Install a state from :meth:`take_group` of an instance of the same query.

        An ordered join (the default) refuses a state with generations on disk: results it
        misses could precede results this instance already emitted. Lazy-disk never moves such
        groups; to move them anyway, build both instances with ``ordered=False``.
        """
        if self.ordered and state.generations:
            raise ConfigError(f"{self._where}: partition group {state.gid} has generations on "
                              f"disk and this join keeps its output ordered; move groups "
                              f"before they spill, or build the join with ordered=False")
        give_state(self._groups[self._gid(state.gid)], self._spill, self._stored, state)

    def push_group(self, gid: int) -> int:
        """Push group ``gid``'s memory part to disk now (a plan's push, §4.3); bytes pushed."""
        group = self._groups[self._gid(gid)]
        size = group.size
        if group.memory.num_rows:
            last = int(column(group.memory, MS, np.int64)[-1])
            floor = max(v for v in (last, self._now, self._bound) if v is not None)
            group.generations.append(self._spill.write(group.gid, group.memory, last, floor))
            group.memory = self._empty
            self.counts.pushes += 1
            self.counts.pushed_bytes += size
        return size

    def _gid(self, gid: int) -> int:
        """``gid`` if it names a group (ConfigError otherwise)."""
        if not 0 <= gid < self.n_groups:
            raise ConfigError(f"{self._where}: partition group {gid} does not exist; groups "
                              f"are 0..{self.n_groups - 1}")
        return gid
