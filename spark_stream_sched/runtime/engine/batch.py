"""One micro-batch of a query over a set of partition groups: the engine's one entry per batch.

Every door runs its micro-batches through :meth:`GroupedBatch.run`: the Spark source's
``read()`` and the batch read (a task's groups), the sink's write tasks and the catch-up at its
commit (:mod:`~spark_stream_sched.runtime.engine.sink_batch`), and the ``ordered()``
transformation's processor (one group per call). A door hands it the batch's new rows of every
input (with ``__input``/``__seq``), the ready bounds before and after the batch, a
:class:`~spark_stream_sched.runtime.state.store.GroupStore` and the query's hold bound; it gets
back the closed windows (or rows, sessions) in output order. Per batch:

1. rows below the bound already released fail, or are dropped under ``outOfOrder=drop``
   (only an input that was idle, or is out of order, can send them);
2. each row goes to its partition group (:func:`~..distribution.groups.group_of_rows`); rows of
   other groups are ignored (another task owns them);
3. per group: load its state (rows not ready yet + the operator's snapshot), append the new rows
   and release those with ``ts < R`` in the total order ``(ts, input, seq)``
   (:func:`~spark_stream_sched.runtime.merge.release_ready`, the release step of S-Merge with
   the *query's* ``R``, so the result does not depend on the partitioning);
4. filter (``where``) and run the group operators -- one after another, or as a plan of one
   path per group on the threaded executor under a scheduling strategy;
5. save every group's new state and return the results in the query's output order.

**The hold bound.** A join whose state went to disk misses results until its clean-up stage
produces them, and holds back the results those could precede (``H``,
:mod:`~spark_stream_sched.runtime.keyed.join_hold`). Groups release independently, so for the
concatenated output of all batches to stay in the total order every group must also hold back
what *another* group's missing results could precede: the door passes ``hold``, the least ``H``
over all groups as the previous batch left them (recorded in the state's manifests), lowered
to the previous ``R`` when the distribution manager pushes groups before this batch's rows.
Every ``H`` a group reaches in this batch is at least ``min(hold, R)`` (a push's floor is at
least the bound of its time), so results below ``min(R, hold)`` are final in every group. When
every input has finished (``R`` is +infinity) every group cleans up in this batch and nothing is
held.

Distributed adaptation (:mod:`~spark_stream_sched.runtime.distribution`) reads each group's
``P_s``, results and bytes on disk from the batch's metrics (``group_loads``), and the batch
first pushes the join state of the groups in ``pushes`` to disk.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.distribution.groups import group_of_rows, split_by_group
from spark_stream_sched.runtime.distribution.loads import (
    JOIN_FIGURES,
    hold_of,
    join_figures,
    memory_bytes,
    push_to_disk,
    release,
    spilled_bytes,
)
from spark_stream_sched.runtime.engine.order import in_output_order
from spark_stream_sched.runtime.keyed.join_state import spilling_under
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.merge import release_ready
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX, event_times
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.query.ordered import GroupOperator
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.state.store import Entry, GroupState, GroupStore

log = logging.getLogger(__name__)

#: Packets of a group's rows queued ahead of its window operator: the rest are fed as the plan
#: takes them (``Engine.run(read_ahead=...)``), so the strategy decides what stays queued.
READ_AHEAD = 4
#: Statistics learned per (spec fingerprint, groups, strategy): seed the next batch's plan.
_LEARNED: dict[tuple[str, tuple[int, ...], str], StatsTable] = {}
#: The error for a late row at the source, where only an input that was idle can send one
#: (fields: input, position, ts, bound).
IDLE_LATE = ("input {input} sent a late row at position {position}: ts {ts} is below the ready "
             "bound {bound} already released while the input was idle (idleTimeout); raise "
             "idleTimeout or set outOfOrder=drop to drop late rows")
#: One group's work: (snapshot, released rows, pending rows).
Loaded = tuple[bytes | None, pa.Table, pa.Table]


@dataclass
class BatchResult:
    """What one batch produced: results in output order, new states (with ``H``), metrics.

    ``per_group`` keeps each group's results as its operator returned them (internal columns
    included), for a door that combines the results of several runs (the sink's commit).
    """

    output: pa.Table
    states: dict[int, GroupState]
    metrics: dict[str, Any] = field(default_factory=dict)
    per_group: dict[int, pa.Table] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupedBatch:
    """Runs micro-batches of ``spec`` for the partition groups ``groups`` (see module doc).

    ``scheduler`` None runs the groups one after another unless ``workers`` > 1, which runs
    them on the executor under ``fifo``; with a strategy name they run on the executor with
    ``workers`` threads. Results are identical in every case. ``pushes``: groups whose join
    state is pushed to disk before the batch's rows (a recorded plan's pushes). ``late``: the
    error for a late row at this door, a format string with the fields ``input``,
    ``position`` (the row's ``__seq``), ``ts`` and ``bound``. ``spill_location``: where the
    join stages spill (option ``spillLocation``; None: the system temp directory).
    """

    spec: QuerySpec
    input_schema: pa.Schema
    groups: tuple[int, ...]
    scheduler: str | None = None
    workers: int = 1
    pushes: tuple[int, ...] = ()
    late: str = IDLE_LATE
    spill_location: str | None = None

    @property
    def strategy(self) -> str | None:
        """The executor's strategy, or None for the direct path.

        A query with keyed operators runs its groups on the direct path: in Spark the tasks
        are the parallelism, and the executor's plan is one window operator per group.
        """
        if self.spec.operators:
            return None
        return self.scheduler or ("fifo" if self.workers > 1 else None)

    def run(self, rows: pa.Table, store: GroupStore, start_bound: int | None,
            end_bound: int | None, hold: int | None = None) -> BatchResult:
        """Move the groups from the batch's start to its end; return the results.

        ``start_bound`` is ``R`` released before this batch, ``end_bound`` the batch's ``R``
        (the larger of the two is used: an idle input that becomes active cannot move ``R``
        back); ``hold`` the query's hold bound (module doc). Raises
        :class:`~spark_stream_sched.errors.InputError` for late rows under ``outOfOrder=fail``.
        """
        bound = end_bound if start_bound is None or end_bound is None else max(
            end_bound, start_bound)
        hold = None if bound == TS_MAX else hold
        kept = drop_late(rows, start_bound, self.spec, self.late, self.groups)
        group_of = group_of_rows(kept, self.spec.key_columns, self.spec.partition_groups,
                                 self.spec.group_function)
        per_group = self.own_rows(kept, group_of)
        before = {g: store.load(g) for g in self.groups}
        loaded = {g: self.release(before[g], per_group.get(g), bound) for g in self.groups}
        loads: dict[int, list[int]] = {}
        holds: dict[int, int | None] = {}
        metrics: dict[str, Any] = {}
        if self.strategy is None:
            with spilling_under(self.spill_location):
                outputs, windows = self.run_direct(loaded, bound, hold, loads, holds, metrics)
        else:
            outputs, windows, metrics = self.run_on_executor(loaded, bound, self.strategy, loads)
        states = {g: GroupState(loaded[g][2], windows[g], holds.get(g)) for g in self.groups}
        store.save(states)
        out = in_output_order(self.spec, outputs) if outputs else pa.table({})
        metrics.update(self.figures(rows, kept, per_group, before, loaded, states, out))
        metrics.update(group_loads={str(g): loads[g] for g in sorted(loads)},
                       pushed_groups=sorted(g for g in self.pushes if g in loads),
                       ready_bound=bound, hold_bound=hold)
        return BatchResult(out, states, metrics, dict(zip(self.groups, outputs, strict=True)))

    # -- steps -----------------------------------------------------------------------------

    def own_rows(self, rows: pa.Table, group_of: np.ndarray) -> dict[int, pa.Table]:
        """The rows of this batch's groups, per group (each group's rows in their order)."""
        return dict(split_by_group(rows, group_of, only=frozenset(self.groups)))

    def release(self, state: GroupState, rows: pa.Table | None, bound: int | None) -> Loaded:
        """Buffered + new rows of a group split into released (filtered) and pending rows."""
        parts = [self.conformed(t) for t in (state.pending, rows) if t is not None]
        if not parts:
            parts = [empty_rows(self.input_schema)]
        buffered = parts[0] if len(parts) == 1 else pa.concat_tables(
            [parts[0], parts[1].cast(parts[0].schema)])
        released, pending = release_ready(buffered, bound, self.spec.timestamp_column)
        if self.spec.where is not None and released.num_rows:
            keep = Predicate.compile(self.spec.where, released.schema).evaluate(released)
            released = released.filter(pa.array(keep))
        return state.window, released, pending

    def conformed(self, rows: pa.Table) -> pa.Table:
        """``rows`` without the columns that are neither the batch's input columns nor internal.

        A source that reads only the columns its query uses (``SourcePlan.read_schema``) meets
        rows of a release that read all of them: pending rows in the state it wrote, and the
        rows of a batch it split on the driver and Spark replays.
        """
        known = {*self.input_schema.names, INPUT_COL, SEQ_COL}
        if known.issuperset(rows.schema.names):
            return rows
        return rows.select([n for n in rows.schema.names if n in known])

    def run_direct(self, loaded: Mapping[int, Loaded], bound: int | None, hold: int | None,
                   loads: dict[int, list[int]], holds: dict[int, int | None],
                   joined: dict[str, Any]) -> tuple[list[pa.Table], dict[int, bytes]]:
        """Each group's operator, one after another.

        ``loads[g] = [P_s bytes, results emitted, bytes on disk]`` (the figures of the paper's
        §4.3) and ``holds[g]`` (the group's own ``H``) are filled in, and ``joined`` gets what
        the join stages did in this batch (:data:`~..distribution.loads.JOIN_FIGURES`).
        """
        outputs, windows = [], {}
        joined.update(dict.fromkeys(JOIN_FIGURES, 0))
        for g, (snapshot, released, pending) in loaded.items():
            group = self.spec.build_group(self.input_schema, snapshot)
            restored = join_figures(group)
            if g in self.pushes:
                push_to_disk(group)
            out = update(group, released, bound, hold)
            outputs.append(out)
            windows[g] = group.snapshot()
            loads[g] = [memory_bytes(group, pending), out.num_rows, spilled_bytes(group)]
            holds[g] = hold_of(group)
            for name, value in join_figures(group).items():
                joined[name] += value - restored[name]
            release(group)
        return outputs, windows

    def run_on_executor(self, loaded: Mapping[int, Loaded], bound: int | None, strategy: str,
                        loads: dict[int, list[int]]
                        ) -> tuple[list[pa.Table], dict[int, bytes], dict[str, Any]]:
        """The groups as a plan of window operators, one path per group, on the executor.

        The strategy decides which group's operator runs next and ``workers`` threads run them
        (Jiang & Chakravarthy's strategies; Falt & Yaghob's task order); each operator
        continues from the group's state with the batch's fixed bound, so the result is the
        direct path's. Window queries only (no holds).
        """
        from spark_stream_sched.runtime.executor.engine import Engine
        from spark_stream_sched.runtime.executor.pools import borrowed_pool
        from spark_stream_sched.runtime.executor.runner import publish
        from spark_stream_sched.runtime.executor.stateful import WindowOperator
        from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan

        s = self.spec
        params = {"size": s.window_ms, "slide": s.slide_ms, "keys": list(s.key_columns),
                  "aggregates": list(s.aggregates), "ts": s.timestamp_column, "bound": bound}
        plan = QueryPlan([OperatorDef(f"w{g}", OperatorKind.WINDOW_AGGREGATE, (f"g{g}",),
                                      params={**params, "state": snapshot})
                          for g, (snapshot, _, _) in loaded.items()])
        learned = _LEARNED.setdefault((s.fingerprint(), self.groups, strategy),
                                      plan.initial_stats())
        with borrowed_pool(self.workers) as pool:
            result = Engine(plan, strategy, ts_column=s.timestamp_column, pool=pool,
                            stats=learned).run(
                {f"g{g}": released for g, (_, released, _) in loaded.items()},
                read_ahead=READ_AHEAD)
        publish(result.stats, learned, {})  # what this batch learned seeds the next one
        windows = {}
        outputs = [result.outputs[f"w{g}"] for g in loaded]
        for (g, (_, _, pending)), out in zip(loaded.items(), outputs, strict=True):
            operator = result.operators[f"w{g}"]
            assert isinstance(operator, WindowOperator)
            windows[g] = operator.aggregator.snapshot()
            loads[g] = [memory_bytes(operator.aggregator, pending), out.num_rows, 0]
        return outputs, windows, {"executor": result.metrics.progress()}

    def figures(self, rows: pa.Table, kept: pa.Table, per_group: Mapping[int, pa.Table],
                before: Mapping[int, GroupState], loaded: Mapping[int, Loaded],
                states: Mapping[int, GroupState], out: pa.Table) -> dict[str, Any]:
        """The batch's row, window and state counts (metrics)."""
        mine = sum(t.num_rows for t in per_group.values())
        buffered = mine + sum(s.pending.num_rows for s in before.values()
                              if s.pending is not None)
        pending = sum(p.num_rows for _, _, p in loaded.values())
        state_bytes = sum(len(s.window or b"") + (s.pending.nbytes if s.pending is not None
                                                    else 0) for s in states.values())
        return {"rows_read": rows.num_rows, "late_dropped": rows.num_rows - kept.num_rows,
                "rows_of_partition": mine, "rows_released": buffered - pending,
                "rows_pending": pending, "windows_out": out.num_rows,
                "groups": len(self.groups), "state_bytes": state_bytes}


def query_hold(entries: Mapping[int, Entry | None], start_bound: int | None,
               pushes_planned: bool) -> int | None:
    """The query's hold bound for a batch starting from a version with these ``entries``.

    The least ``H`` over every group as the version left them; when the distribution manager
    pushes groups before the batch's rows, also ``start_bound`` (such a push's floor is the
    bound released before the batch). None: nothing is held.
    """
    floors = [e.hold for e in entries.values() if e is not None and e.hold is not None]
    if pushes_planned and start_bound is not None:
        floors.append(start_bound)
    return min(floors) if floors else None


def update(group: GroupOperator, rows: pa.Table, bound: int | None,
           hold: int | None) -> pa.Table:
    """One group operator's update; a pipeline also gets the query's hold bound."""
    if isinstance(group, Pipeline):
        return group.update(rows, bound, hold)
    return group.update(rows, bound)


def drop_late(rows: pa.Table, start_bound: int | None, spec: QuerySpec, late: str,
              groups: Collection[int] | None = None) -> pa.Table:
    """Refuse (or, with ``outOfOrder=drop``, drop) rows below the bound already released.

    ``late`` is the error message's format (see :class:`GroupedBatch`). The warning for
    dropped rows counts those of partition ``groups`` only (None: every row): a source task
    of ``splitRows=tasks`` reads the whole batch, and counting every late row in each task
    would log the batch's figure once per task. The first late row of ``rows`` is refused
    whatever its group, so every task names the same row.
    """
    if start_bound is None or rows.num_rows == 0:
        return rows
    ts = event_times(rows, spec.timestamp_column, "batch rows")
    is_late = ts < start_bound
    if not is_late.any():
        return rows
    first = int(np.flatnonzero(is_late)[0])
    row = rows.slice(first, 1).to_pylist()[0]
    if spec.out_of_order == "fail":
        raise InputError(late.format(input=row[INPUT_COL], position=row[SEQ_COL],
                                     ts=int(ts[first]), bound=start_bound))
    mine = int(is_late.sum())
    if groups is not None:
        late_groups = group_of_rows(rows.filter(pa.array(is_late)), spec.key_columns,
                                    spec.partition_groups, spec.group_function)
        mine = int(np.isin(late_groups, list(groups)).sum())
    if mine:
        log.warning("dropped %d late rows (outOfOrder=drop)", mine)
    return rows.filter(pa.array(~is_late))


def empty_rows(schema: pa.Schema) -> pa.Table:
    """No rows, with ``schema`` plus ``__input``/``__seq`` (if it lacks them)."""
    for name, kind in ((INPUT_COL, pa.int32()), (SEQ_COL, pa.int64())):
        if name not in schema.names:
            schema = schema.append(pa.field(name, kind))
    return schema.empty_table()
