"""``join([N,] [within=<duration>])``: windowed N-way symmetric hash equi-join (seed 003 §3-§4).

Joins the N inputs ``0 .. N-1`` of the merge (``N`` = the positional argument, 2 to 8, default
2; a tuple of an input ``>= N`` is refused) on the query's key columns, ``A ⋈ B ⋈ C ...``:

* a *result* combines one tuple of **every** input, all with equal keys (a null in any key column
  never matches: such tuples are neither stored nor probed; key values compare as in
  :func:`~spark_stream_sched.runtime.keys.key_ids`, ``-0.0`` equal to ``0.0`` and NaN to NaN;
  the key's stable hash only picks the partition group and narrows the probe);
* windowed (``within=W``), all its tuples' event times satisfy ``max ts - min ts < W``; without
  ``within`` the inputs are joined whole (finite inputs);
* it is emitted when its **last** tuple in the total order ``(ts, input, seq)`` arrives -- the
  symmetric hash join: the arriving tuple probes the stored tuples of the other inputs
  (:mod:`~spark_stream_sched.runtime.keyed.join_match`), then is stored itself;
* results leave ordered by the position of that completing tuple, then by the partners'
  positions, input 0's partner first (:func:`~spark_stream_sched.testing.join_reference` is the
  batch oracle of this definition).

Output columns: the completing tuple's ts, ``__input`` and ``__seq`` (so the pipeline's ordering
holds), the key columns, then per input ``j`` every payload column (not ts, not a key, not
internal) suffixed ``_j`` and ``<ts>_j``: ``ts, __input, __seq, k, value_0, ts_0, value_1, ts_1``.
A tuple that completes several results gives several rows with the same ``(__input, __seq)``.

**State** lives in ``n_groups`` (default 16) partition groups (seed 003 §4.1; a key's group is
:func:`~spark_stream_sched.runtime.keys.assign_to_partition_group` of the high 32 bits of its
hash, since the task split upstream already used the low bits), with ``P_s``, ``P_o``, ``T_u``
(:mod:`~spark_stream_sched.runtime.keyed.join_state`, :meth:`Join.groups_stats`). Purge: once
``ts + W <= bound`` a stored tuple can join no later tuple (every later one has ``ts >= bound``)
and is dropped. An update loops over the partition groups it touches (at most ``n_groups``
iterations, never one per key or tuple); inside a group, probing is NumPy over the whole packet.

**Disk adaptation** (seed 003 §4.1, §4.3) under ``memory_budget`` bytes (constructor argument,
or ``budget=64k`` in the stage): when the memory-resident state exceeds it after an update,
groups are pushed to disk as generations in :func:`~.join_state.push_order` (idle for longer
than ``theta_t = inactive_after`` event-time ms first, default ``W``; then largest ``P_s/P_o``)
until at least ``push_fraction`` (30%) of the bytes went and the rest fits. A pushed generation
stops producing results: results between it and later tuples are *missing* until the **clean-up
stage** (§4.2) merges all generations of the group with its memory part and emits exactly
``V' - V_1 - ... - V_k`` (Eq. 1 applied iteratively): the results over the union whose tuples do
not all come from one epoch (generation or memory part). It runs for the generations whose
window closed -- ``bound >= max ts of the generation + W``: no later tuple can join them (a
prefix, as generations are pushed in order) -- and produces the results whose earliest tuple
is in one of them; later epochs are left to their own clean-up, so a group pushed again and
again still cleans up its old generations. Every memory tuple arrived after the last push, so
its ``ts >= max ts of the generations`` and it is purged only at a bound ``>= ts + W``, never
before such a clean-up, which runs before the purge of the same update. :meth:`Join.finish`
cleans up everything (unwindowed joins clean up only there).

**Order with spilling.** By default (``ordered=True``) the output stays in the total order
whatever is pushed: results that a missing result could precede are held in a reorder buffer
(:mod:`~spark_stream_sched.runtime.keyed.join_hold`) and released merged with the clean-up
results, so the concatenated output equals the oracle's exactly, in order, and a following
stage gets the ready bound :meth:`Join.output_bound` (``min(R, H)``). ``ordered=False`` is seed
003's behaviour (the adaptation bench): an update returns the results probed in it, then those
of the groups it cleaned up (late; the multiset is still the oracle's). Either way, with the
same rows, cuts, bounds and budget the output is identical on every run, restored or not
(decisions use event time and Arrow byte counts; restored parts get fresh buffers).

**Snapshots** fold the spilled generations in (read back and checksum-verified): a snapshot is
self-contained, survives the loss of the spill directory and the deletion of generation files
by a later clean-up; :meth:`Join.restore` writes them back as generations in its own spill
directory (held results too). The price: a snapshot is as large as the whole state.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator, register
from spark_stream_sched.runtime.keyed.groups import KEY
from spark_stream_sched.runtime.keyed.join_hold import HeldResults
from spark_stream_sched.runtime.keyed.join_match import Matches, column, match, member, order_keys
from spark_stream_sched.runtime.keyed.join_match import ordered_results as ordered
from spark_stream_sched.runtime.keyed.join_spec import (
    check_inputs,
    check_query_inputs,
    join_output_schema,
    parse_join,
    route,
)
from spark_stream_sched.runtime.keyed.join_state import (
    PartitionGroup,
    SpillStore,
    choose_pushes,
    drop_generations,
    fold_groups,
    unfold_groups,
)
from spark_stream_sched.runtime.keyed.join_transfer import GroupState, give_state, take_state
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.keys import key_ids
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, event_times
from spark_stream_sched.runtime.state.snapshot import decode, encode

KIND = "keyed.join"
#: Stored event time in ms (so memory parts need no conversion when probed or purged).
MS = "__ms"
DEFAULT_GROUPS = 16
DEFAULT_PUSH_FRACTION = 0.3


@register
class Join(KeyedOperator):
    """``join([N,] [within=<duration>])`` (see the module docstring).

    Parameters
    ----------
    stage, input_schema, key_columns, ts_column, aggregates
        As for every :class:`~.base.KeyedOperator`.
    memory_budget
        Bytes of memory-resident state before groups are pushed to disk (None: never; overrides
        a ``budget=`` stage keyword).
    spill_dir
        Parent of the operator's private spill directory (None: the system temp directory).
    n_groups
        Partition groups inside this operator (seed 003 §4.1 granularity).
    push_fraction
        Least fraction of the memory bytes pushed per trigger (seed 003 §4.4: 30%).
    inactive_after
        ``theta_t`` in event-time ms (default: the window; unwindowed: no idle rule).
    ordered
        Keep the output in the total order while state is pushed (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: bad arguments (:func:`~.join_spec.parse_join`), a missing column,
        clashing output names, ``n_groups < 1`` or ``push_fraction`` outside ``(0, 1]``.
    """

    name = "join"
    emits_rows = True

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = (), *,
                 memory_budget: int | None = None, spill_dir: str | None = None,
                 n_groups: int = DEFAULT_GROUPS, push_fraction: float = DEFAULT_PUSH_FRACTION,
                 inactive_after: int | None = None, ordered: bool = True) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        self.n_inputs, self.within, budget = parse_join(stage)
        self.memory_budget = memory_budget if memory_budget is not None else budget
        self.spill_dir, self.n_groups, self.push_fraction = spill_dir, n_groups, push_fraction
        self.inactive_after = inactive_after if inactive_after is not None else self.within
        if n_groups < 1 or not 0 < push_fraction <= 1:
            raise stage.fail(f"n_groups must be >= 1 and push_fraction in (0, 1], got "
                             f"{n_groups} and {push_fraction}")
        for name in (ts_column, *key_columns, INPUT_COL, SEQ_COL):
            if name not in input_schema.names:
                raise stage.fail(f"column {name!r} is missing; columns are {input_schema.names}")
        hidden = {ts_column, *key_columns, INPUT_COL, SEQ_COL}
        self.payload = [n for n in input_schema.names if n not in hidden and not n.startswith("__")]
        self._stored = pa.schema([*input_schema, pa.field(KEY, pa.uint64()),
                                  pa.field(MS, pa.int64())])
        self._where = f"operator {stage.text()!r}"
        self._output = join_output_schema(input_schema, ts_column, self.key_columns,
                                          self.payload, self.n_inputs, stage)
        self._groups = [PartitionGroup(g, self._stored.empty_table()) for g in range(n_groups)]
        self._spill = SpillStore(spill_dir)
        self.ordered = ordered
        self._held = HeldResults(self._output, self.n_inputs, self._spill)
        self._now: int | None = None
        self._bound: int | None = None
        self.pushes = 0
        self.cleanups = 0

    @classmethod
    def check_query_inputs(cls, stage: StageSpec, n_inputs: int) -> None:
        """ConfigError naming ``stage`` if it joins more inputs than the query has."""
        check_query_inputs(stage, n_inputs)

    @property
    def output_schema(self) -> pa.Schema:
        """See the module docstring."""
        return self._output

    # -- normal run: probe, insert, clean up, purge, push ------------------------------------

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Results completed by ``rows``, then those of groups whose window ``bound`` closed."""
        rows = rows.select(self.input_schema.names).cast(self.input_schema)
        ms = event_times(rows, self.ts_column, self._where)
        check_inputs(rows, self.n_inputs, self.stage)
        hashes, valid, group_of = route(rows, self.key_columns, self.n_groups)
        stored = rows.append_column(KEY, pa.array(hashes, pa.uint64())).append_column(
            MS, pa.array(ms, pa.int64()))
        holding = self.ordered and (self._held.rows > 0 or self.hold_from is not None)
        probed = []
        for gid in np.unique(group_of[valid]):  # one iteration per partition group (<= P)
            index = np.flatnonzero(valid & (group_of == gid))
            probed.append(self._probe(self._groups[gid], stored.take(index),
                                      None if holding else index))
        if rows.num_rows:
            self._now = int(ms[-1]) if self._now is None else max(self._now, int(ms[-1]))
        self._bound = bound if bound is not None else self._bound
        cleaned = []
        if bound is not None and self.within is not None:
            closing = [(g, sum(bound >= x.max_ms + self.within for x in g.generations))
                       for g in self._groups]
            cleaned = [self._clean_up(g, closed) for g, closed in closing if closed]
            self._purge(bound - self.within)
        self._push()
        if holding:  # a missing result may precede some of them: through the reorder buffer
            return self._held.release(probed + cleaned, self.hold_from)
        return pa.concat_tables([ordered(probed, self._output), ordered(cleaned, self._output)])

    @property
    def hold_from(self) -> int | None:
        """``H``: least ts a result still missing can have (None: nothing is on disk)."""
        floors = [g.hold_from for g in self._groups if g.hold_from is not None]
        return min(floors) if floors else None

    def output_bound(self, bound: int | None) -> int | None:
        """Ready bound for the next stage: ``min(bound, H)`` (results at ``ts >= H`` wait)."""
        hold = self.hold_from if self.ordered else None
        return bound if bound is None or hold is None else min(bound, hold)

    def _probe(self, group: PartitionGroup, packet: pa.Table,
               index: np.ndarray | None) -> tuple[pa.Table, np.ndarray]:
        """Match ``packet`` against the group's memory part and itself, then store it.

        ``index`` gives the packet's rows in the update; it is the results' sort key (None: the
        full order keys, for the reorder buffer).
        """
        memory, ms = group.memory, column(packet, MS, np.int64)
        if memory.num_rows:  # equal hashes: a superset of the equal keys (match compares values)
            useful = member(column(memory, KEY, np.uint64),
                            np.unique(column(packet, KEY, np.uint64)))
            if self.within is not None:
                useful &= column(memory, MS, np.int64) > ms[0] - self.within
            memory = memory.filter(pa.array(useful))
        universe = pa.concat_tables([memory, packet]).combine_chunks()
        found = self._match(universe, np.arange(memory.num_rows, universe.num_rows))
        group.produced += len(found)
        group.insert(packet, int(ms[-1]))
        if index is None:
            return self._results(universe, found, order_keys(universe, found, MS))
        return self._results(universe, found,
                             index[found.probe - memory.num_rows].reshape(1, -1))

    def _purge(self, horizon: int) -> None:
        """Drop memory tuples with ``ts <= horizon = bound - within`` (they join nothing later)."""
        for group in self._groups:
            if group.memory.num_rows:
                group.keep(pa.array(column(group.memory, MS, np.int64) > horizon))

    def _push(self) -> None:
        """Disk adaptation (seed 003 §4.3) when the memory part exceeds the budget."""
        if self.memory_budget is None:
            return
        if self._held.size and self.state_bytes > self.memory_budget:
            self._held.push()  # held results are only read at release: they go first
        for group in choose_pushes(self._groups, self.memory_budget, self.push_fraction,
                                   self._now, self.inactive_after):
            self.push_group(group.gid)

    # -- distributed adaptation hooks (seed 003 §5.1): route, move and push one group ---------

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
            group.memory = self._stored.empty_table()
            self.pushes += 1
        return size

    def _gid(self, gid: int) -> int:
        """``gid`` if it names a group (ConfigError otherwise)."""
        if not 0 <= gid < self.n_groups:
            raise ConfigError(f"{self._where}: partition group {gid} does not exist; groups "
                              f"are 0..{self.n_groups - 1}")
        return gid

    # -- clean-up stage (seed 003 §4.2, Eq. 1) -----------------------------------------------

    def _clean_up(self, group: PartitionGroup, closed: int | None = None
                  ) -> tuple[pa.Table, np.ndarray]:
        """The missing results with a tuple of the group's first ``closed`` generations (all).

        Over all its epochs, the results spanning two or more whose earliest epoch is one of
        those generations, which are then deleted (later epochs keep their own clean-up).
        """
        closed = len(group.generations) if closed is None else closed
        parts = [self._spill.read(g, self._stored) for g in group.generations] + [group.memory]
        epoch = np.repeat(np.arange(len(parts)), [p.num_rows for p in parts])
        universe = pa.concat_tables(parts).combine_chunks()
        found = self._match(universe, np.arange(universe.num_rows))
        first = np.minimum.reduce([epoch[p] for p in found.partners])
        found = found.where((first < closed) & (first != epoch[found.probe]))
        group.produced += len(found)
        for generation in group.generations[:closed]:
            self._spill.delete(generation)
        group.generations = group.generations[closed:]
        self.cleanups += 1
        return self._results(universe, found, order_keys(universe, found, MS))

    def finish(self) -> pa.Table:
        """End of input: clean up every group that still has generations on disk."""
        cleaned = [self._clean_up(g) for g in self._groups if g.generations]
        out = self._held.release(cleaned, None) if self.ordered else ordered(cleaned, self._output)
        self._spill.close()
        return out

    # -- results ------------------------------------------------------------------------------

    def _match(self, universe: pa.Table, probes: np.ndarray) -> Matches:
        ids = key_ids(universe, self.key_columns, column(universe, KEY, np.uint64))
        return match(ids, column(universe, INPUT_COL, np.int64), column(universe, MS, np.int64),
                     probes, self.n_inputs, self.within)

    def _results(self, universe: pa.Table, found: Matches,
                 keys: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        """Output rows of ``found``, with their sort ``keys`` (one row per key, major first)."""
        head = universe.select([self.ts_column, INPUT_COL, SEQ_COL, *self.key_columns])
        columns = list(head.take(found.probe).columns)
        for partner in found.partners:
            columns += universe.select([*self.payload, self.ts_column]).take(partner).columns
        return pa.Table.from_arrays(columns, schema=self._output), keys

    # -- statistics, snapshots ----------------------------------------------------------------

    def groups_stats(self) -> list[dict[str, int | float | None]]:
        """``P_s``, ``P_o``, ``T_u`` and spilled rows of every partition group (seed 003 §4.3)."""
        return [g.stats() for g in self._groups]

    @property
    def spilled_bytes(self) -> int:
        """Bytes of state on disk (generations and held results), as they took in memory."""
        return sum(x.size for g in self._groups for x in g.generations) + self._held.spilled_bytes

    @property
    def state_bytes(self) -> int:
        """Bytes of memory-resident state (the sum of ``P_s`` and the held results in memory)."""
        return sum(g.size for g in self._groups) + self._held.size

    def snapshot(self) -> bytes:
        """Snapshot bytes with memory parts and spilled generations folded in."""
        groups, tables = fold_groups(self._groups, self._spill, self._stored)
        held, tables["held"] = self._held.fold()
        meta: dict[str, Any] = {
            "args": list(self.stage.args), "kwargs": [list(kv) for kv in self.stage.kwargs],
            "keys": self.key_columns, "ts": self.ts_column, "aggregates": list(self.aggregates),
            "budget": self.memory_budget, "spill_dir": self.spill_dir, "n_groups": self.n_groups,
            "fraction": self.push_fraction, "inactive_after": self.inactive_after,
            "now": self._now, "pushes": self.pushes, "cleanups": self.cleanups,
            "groups": groups, "ordered": self.ordered, "bound": self._bound, "held": held,
        }
        return encode(KIND, meta, {"schema": self.input_schema.empty_table(), **tables})

    def close(self) -> None:
        """Delete the spilled files and directory (the state lives on in :meth:`snapshot`)."""
        self._held.drop()
        drop_generations(self._groups, self._spill)

    @classmethod
    def restore(cls, data: bytes) -> Join:
        """Rebuild the operator (its generations re-spilled to a fresh directory)."""
        meta, tables = decode(data, KIND)
        try:
            return cls._rebuild(meta, tables)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"snapshot of operator 'join' does not match its format ({exc}); "
                             f"it was not written by this version") from exc

    @classmethod
    def _rebuild(cls, meta: dict[str, Any], tables: dict[str, pa.Table]) -> Join:
        stage = StageSpec(cls.name, tuple(meta["args"]),
                          tuple((str(k), str(v)) for k, v in meta["kwargs"]))
        op = cls(stage, tables["schema"].schema, list(meta["keys"]), str(meta["ts"]),
                 tuple(meta["aggregates"]), memory_budget=meta["budget"],
                 spill_dir=meta["spill_dir"], n_groups=int(meta["n_groups"]),
                 push_fraction=float(meta["fraction"]), inactive_after=meta["inactive_after"],
                 ordered=bool(meta.get("ordered", False)))
        op._now, op._bound = meta["now"], meta.get("bound")
        op.pushes, op.cleanups = meta["pushes"], meta["cleanups"]
        unfold_groups(op._groups, op._spill, op._stored, meta["groups"], tables)
        if "held" in tables:
            op._held.unfold(meta["held"], tables["held"])
        return op
