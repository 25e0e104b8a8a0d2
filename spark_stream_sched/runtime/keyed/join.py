"""``join([N,] [within=<duration>])``: windowed N-way symmetric hash equi-join.

See Liu & Rundensteiner (2005), §3-§4.

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

**State** lives in ``n_groups`` (default 16) partition groups (Liu & Rundensteiner 2005, §4.1; a
key's group
comes from the high 32 bits of its hash: the task split upstream used the low bits), with
``P_s``, ``P_o``, ``T_u`` (:mod:`~spark_stream_sched.runtime.keyed.join_state`). A stored tuple
with ``ts + W <= bound`` can join no later tuple and is purged. An update loops over the groups
it touches (never over keys or tuples); inside a group, probing is NumPy over the packet.

**Disk adaptation** (Liu & Rundensteiner 2005, §4.1, §4.3) under ``memory_budget`` bytes
(constructor argument,
or ``budget=64k`` in the stage): when the memory-resident state exceeds it after an update,
groups are pushed to disk as generations (:func:`~.join_state.choose_pushes`: idle for longer
than ``theta_t = inactive_after`` event-time ms first, default ``W``, then largest ``P_s/P_o``,
until ``push_fraction`` (30%) of the bytes went and the rest fits). A pushed generation stops
producing results: the results between it and later tuples are *missing* until the **clean-up
stage** (§4.2, Eq. 1; :mod:`~spark_stream_sched.runtime.keyed.cleanup`) produces exactly them,
for the generations whose window closed (``bound >= max ts + W``) before the same update's
purge, and for every generation in :meth:`Join.finish` (unwindowed joins: only there). A
clean-up reads a group back one key slice of at most the budget at a time.

**Order with spilling.** By default (``ordered=True``) results that a missing result could
precede wait in a reorder buffer (:mod:`~spark_stream_sched.runtime.keyed.join_hold`) and leave
merged with the clean-up results: the concatenated output equals the oracle's, in order, and a
following stage gets the ready bound :meth:`Join.output_bound` (``min(R, H)``).
``ordered=False`` is Liu & Rundensteiner's (2005) behaviour (the adaptation bench): clean-up
results leave late. Either way the output is the same on every run, restored or not. At the
end of input, :meth:`Join.finish_parts` hands the results out in order, part by part,
merging the buffer's runs on disk (:mod:`~spark_stream_sched.runtime.keyed.join_merge`), and
:meth:`Join.finish` returns the same parts as one table; ``stats["peak_bytes"]`` is the most
the join held.

**Snapshots** are self-contained, spilled state folded in (:mod:`.join_snapshot`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.base import KeyedOperator, register
from spark_stream_sched.runtime.keyed.cleanup import clean_up_group
from spark_stream_sched.runtime.keyed.groups import KEY
from spark_stream_sched.runtime.keyed.join_hold import HeldResults, piece_rows
from spark_stream_sched.runtime.keyed.join_match import (
    MS,
    JoinShape,
    Matches,
    column,
    order_keys,
    probe_group,
    result_rows,
)
from spark_stream_sched.runtime.keyed.join_match import ordered_results as ordered
from spark_stream_sched.runtime.keyed.join_snapshot import restore_join, snapshot_join
from spark_stream_sched.runtime.keyed.join_spec import (
    check_inputs,
    check_query_inputs,
    join_output_schema,
    parse_join,
    route,
)
from spark_stream_sched.runtime.keyed.join_state import (
    JoinCounts,
    PartitionGroup,
    SpillStore,
    arrow_bytes,
    choose_pushes,
    drop_generations,
)
from spark_stream_sched.runtime.keyed.join_transfer import GroupTransfer
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX, event_times

DEFAULT_GROUPS = 16
DEFAULT_PUSH_FRACTION = 0.3


@register
class Join(GroupTransfer, KeyedOperator):
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
        Partition groups inside this operator (Liu & Rundensteiner 2005, §4.1 granularity).
    push_fraction
        Least fraction of the memory bytes pushed per trigger (Liu & Rundensteiner 2005, §4.4: 30%).
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
        self.shape = JoinShape(self.key_columns, self.n_inputs, self.within)
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
        self._no_results = self._output.empty_table()
        # one empty table for every group: tables are immutable, and building one costs about
        # 0.2 ms (a sink rebuilds each group's join from its snapshot in every batch)
        self._empty = self._stored.empty_table()
        self._groups = [PartitionGroup(g, self._empty) for g in range(n_groups)]
        self._spill = SpillStore(spill_dir)
        self.ordered = ordered
        self._held = HeldResults(self._output, self.n_inputs, self._spill,
                                 piece_rows(self.memory_budget, self._output, self.n_inputs),
                                 self._note)
        self._now: int | None = None
        self._bound: int | None = None
        self.counts = JoinCounts()

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
        holding = self.ordered and (self._held.rows > 0 or self.release_below is not None)
        probed = []
        for gid in np.unique(group_of[valid]):  # one iteration per partition group (<= P)
            index = np.flatnonzero(valid & (group_of == gid))
            probed.append(self._probe(self._groups[gid], stored.take(index),
                                      None if holding else index))
        if rows.num_rows:
            self._now = int(ms[-1]) if self._now is None else max(self._now, int(ms[-1]))
        self._bound = bound if bound is not None else self._bound
        cleaned = []
        if bound == TS_MAX:  # every input finished: no later tuple, every group cleans up
            cleaned = [p for g in self._groups if g.generations for p in self._clean_up(g)]
        elif bound is not None and self.within is not None:
            closing = [(g, sum(bound >= x.max_ms + self.within for x in g.generations))
                       for g in self._groups]
            cleaned = [p for g, closed in closing if closed for p in self._clean_up(g, closed)]
            self._purge(bound - self.within)
        if bound != TS_MAX:
            self._push()
        self._note(0)
        if holding:  # a missing result may precede some of them: through the reorder buffer
            return self._held.release(probed + cleaned, self.release_below)
        return pa.concat_tables([ordered(probed, self._output), ordered(cleaned, self._output)])

    @property
    def hold_from(self) -> int | None:
        """``H``: least ts a result still missing can have (None: nothing is on disk)."""
        floors = [g.hold_from for g in self._groups if g.hold_from is not None]
        return min(floors) if floors else None

    @property
    def release_below(self) -> int | None:
        """Results leave below ``min(H, hold_cap)``: this join's missing results and the query's."""
        floors = [h for h in (self.hold_from, self.hold_cap) if h is not None]
        return min(floors) if floors else None

    def output_bound(self, bound: int | None) -> int | None:
        """Ready bound for the next stage: ``min(bound, H, hold_cap)`` (later results wait)."""
        hold = self.release_below if self.ordered else None
        return bound if bound is None or hold is None else min(bound, hold)

    def _probe(self, group: PartitionGroup, packet: pa.Table,
               index: np.ndarray | None) -> tuple[pa.Table, np.ndarray]:
        """Results of ``packet`` in ``group`` (:func:`~.join_match.probe_group`), then store it.

        ``index`` gives the packet's rows in the update; it is the results' sort key (None: the
        full order keys, for the reorder buffer).
        """
        universe, found, stored = probe_group(group.memory, packet, self.shape)
        group.produced += len(found)
        group.insert(packet, int(column(packet, MS, np.int64)[-1]))
        keys = (order_keys(universe, found, MS) if index is None
                else index[found.probe - stored].reshape(1, -1))
        if not len(found.probe):  # the common case: skip the column takes of no rows
            return self._no_results, keys
        return result_rows(universe, found, self._output, self.payload), keys

    def _purge(self, horizon: int) -> None:
        """Drop memory tuples with ``ts <= horizon = bound - within`` (they join nothing later)."""
        for group in self._groups:
            if group.memory.num_rows:
                group.keep(pa.array(column(group.memory, MS, np.int64) > horizon))

    def _push(self) -> None:
        """Disk adaptation (Liu & Rundensteiner 2005, §4.3) when the memory part is over budget."""
        if self.memory_budget is None:
            return
        self._push_held()  # held results are only read at release: they go first
        for group in choose_pushes(self._groups, self.memory_budget, self.push_fraction,
                                   self._now, self.inactive_after):
            self.push_group(group.gid)

    def _push_held(self) -> None:
        """Write the held results to disk if the memory-resident state exceeds the budget."""
        if self.memory_budget is not None and self._held.size and (
                self.state_bytes > self.memory_budget):
            self.counts.held_pushed_bytes += self._held.push()

    # -- clean-up stage (Liu & Rundensteiner 2005, §4.2, Eq. 1): :mod:`.cleanup`
    # -------------------------------

    def _clean_up(self, group: PartitionGroup, closed: int | None = None, hold: bool = False
                  ) -> list[tuple[pa.Table, np.ndarray]]:
        """Output rows and order keys of the missing results of the first ``closed`` (all).

        One ``(rows, keys)`` pair per key slice (:func:`~.cleanup.clean_up_group`); with
        ``hold``, each slice's pair goes into the reorder buffer (to disk over the budget)
        before the next slice is read back, and none is returned.
        """
        closed = len(group.generations) if closed is None else closed
        parts: list[tuple[pa.Table, np.ndarray]] = []

        def emit(universe: pa.Table, found: Matches) -> None:
            part = (result_rows(universe, found, self._output, self.payload),
                    order_keys(universe, found, MS))
            self._note(arrow_bytes(universe) + arrow_bytes(part[0]) + part[1].nbytes)
            if hold:
                self._held.hold([part])
                self._push_held()
            else:
                parts.append(part)

        clean_up_group(group, self._spill, self._stored, closed, self.shape, self.counts,
                       self.memory_budget, emit)
        return parts

    def finish(self) -> pa.Table:
        """End of input: every result still open, in order (:meth:`finish_parts`, as one table)."""
        return pa.concat_tables([self._output.empty_table(), *self.finish_parts()])

    def finish_parts(self) -> Iterator[pa.Table]:
        """End of input: every result still open, in order, as consecutive tables.

        The groups on disk are cleaned up one at a time, key slice by key slice: each slice's
        missing results are held (written to disk over the budget) before the next slice is
        read back; then the reorder buffer merges its runs (:meth:`.HeldResults.drain`), so no
        part of the way holds every result (unordered: each group's results in turn).
        """
        for group in (g for g in self._groups if g.generations):
            if self.ordered:
                self._clean_up(group, hold=True)
            else:
                yield ordered(self._clean_up(group), self._output)
        yield from self._held.drain([])
        self._spill.close()

    def _note(self, extra: int) -> None:
        """Record the join's bytes in memory, its state plus ``extra`` (``peak_bytes``)."""
        self.counts.peak_bytes = max(self.counts.peak_bytes, self.state_bytes + extra)

    # -- statistics, snapshots ----------------------------------------------------------------

    def groups_stats(self) -> list[dict[str, int | float | None]]:
        """``P_s``, ``P_o``, ``T_u`` and spilled rows of every partition group.

        See Liu & Rundensteiner (2005), §4.3.
        """
        return [g.stats() for g in self._groups]

    @property
    def spilled_bytes(self) -> int:
        """Bytes of state on disk (generations and held results), as they took in memory."""
        return sum(x.size for g in self._groups for x in g.generations) + self._held.spilled_bytes

    @property
    def stats(self) -> dict[str, int | float]:
        """:class:`~.join_state.JoinCounts` and the bytes now on disk, as plain values."""
        return {**asdict(self.counts), "spilled_bytes": self.spilled_bytes}

    @property
    def state_bytes(self) -> int:
        """Bytes of memory-resident state (the sum of ``P_s`` and the held results in memory)."""
        return sum(g.size for g in self._groups) + self._held.size

    def snapshot(self) -> bytes:
        """Snapshot bytes, spilled generations folded in (:mod:`.join_snapshot`)."""
        return snapshot_join(self)

    def close(self) -> None:
        """Delete the spilled files and directory (the state lives on in :meth:`snapshot`)."""
        self._held.drop()
        drop_generations(self._groups, self._spill)

    @classmethod
    def restore(cls, data: bytes) -> Join:
        """Rebuild the operator (its generations re-spilled to a fresh directory)."""
        op: Join = restore_join(cls, data)
        return op
