"""One micro-batch of a query over a set of partition groups: the engine's one entry per batch.

A streaming adapter (the Spark source's ``read()``) hands :meth:`GroupedBatch.run` the batch's
new rows of every input (with ``__input``/``__seq``), the ready bounds before and after the batch
and a :class:`GroupStore` that loads and saves group state; it gets back the closed windows in
output order. Per batch:

1. rows below the bound already released (only an input that was idle can send them) fail, or
   are dropped under ``outOfOrder=drop``;
2. each row goes to its partition group (stable key hash, seed 003); rows of other groups are
   ignored (another task owns them);
3. per group: load the state of the batch's start version (rows not ready yet + the window
   operator's snapshot), append the new rows and release those with ``ts < R`` in the total
   order ``(ts, input, seq)`` (:func:`~spark_stream_sched.runtime.merge.release_ready`, S-Merge's
   release step with the *query's* ``R``, so the result does not depend on the partitioning);
4. filter (``where``) and run the window operators — one after another, or as a plan of one path
   per group on the threaded executor under a scheduling strategy (seed 001 §3, seed 000 §5);
5. save every group's new state and return the windows ordered by
   ``(window_end, window_start, keys)``.

For distributed adaptation (seed 003 §5-§6, :mod:`~.distribution`) the batch also reports, per
group, ``P_s`` (bytes in memory), the results it emitted and the bytes its join stages hold on
disk (metric ``group_loads``), and first pushes the join state of the groups in ``pushes`` to disk
(:mod:`~.group_load`).

Nothing persistent is rebuilt per batch: executor pools are borrowed from
:mod:`~spark_stream_sched.runtime.executor.pools` and the statistics the strategy learned in one
batch seed the next batch of the same groups in this process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.keyed.pipeline import (
    result_order,
    sort_ascending,
    without_internal_columns,
)
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash
from spark_stream_sched.runtime.merge import release_ready
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, event_times
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.query.group_load import (
    memory_bytes,
    push_to_disk,
    release,
    spilled_bytes,
)
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.state.versions import GroupState

log = logging.getLogger(__name__)

#: Packets of a group's rows queued ahead of its window operator: the rest are fed as the plan
#: takes them (``Engine.run(read_ahead=...)``), so the strategy decides what stays queued.
READ_AHEAD = 4
#: Statistics learned per (spec fingerprint, groups, strategy): seed the next batch's plan.
_LEARNED: dict[tuple[str, tuple[int, ...], str], StatsTable] = {}


class GroupStore(Protocol):
    """Where a batch's group state comes from and goes to (one version to the next)."""

    def load(self, group: int) -> GroupState:
        """State of ``group`` at the batch's start (empty before the first batch)."""

    def save(self, states: dict[int, GroupState], meta: dict[str, Any]) -> None:
        """Write the groups' state at the batch's end (``meta``: e.g. the ready bound)."""


@dataclass
class BatchResult:
    """What one batch produced: closed windows in output order, new states, metrics."""

    output: pa.Table
    states: dict[int, GroupState]
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupedBatch:
    """Runs micro-batches of ``spec`` for the partition groups ``groups`` (see module doc).

    ``scheduler`` None runs the groups one after another unless ``workers`` > 1, which runs
    them on the executor under ``fifo``; with a strategy name they run on the executor with
    ``workers`` threads. Results are identical in every case. ``pushes``: groups whose join
    state is pushed to disk before the batch's rows (a recorded plan's pushes).
    """

    spec: QuerySpec
    input_schema: pa.Schema
    groups: tuple[int, ...]
    scheduler: str | None = None
    workers: int = 1
    pushes: tuple[int, ...] = ()

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
            end_bound: int | None) -> BatchResult:
        """Move the groups from the batch's start to its end; return the closed windows.

        ``start_bound`` is ``R`` released before this batch, ``end_bound`` the batch's ``R``
        (the larger of the two is used: an idle input that becomes active cannot move ``R``
        back). Raises :class:`~spark_stream_sched.errors.InputError` for late rows under
        ``outOfOrder=fail``.
        """
        bound = end_bound if start_bound is None or end_bound is None else max(
            end_bound, start_bound)
        kept = self.drop_late(rows, start_bound)
        group_of = self.group_ids(kept)
        per_group = {g: kept.filter(pa.array(group_of == g)) for g in self.groups}
        before = {g: store.load(g) for g in self.groups}
        loaded = {g: self.release(before[g], part, bound) for g, part in per_group.items()}
        loads: dict[int, list[int]] = {}
        if self.strategy is None:
            outputs, windows = self.run_direct(loaded, bound, loads)
            metrics: dict[str, Any] = {}
        else:
            outputs, windows, metrics = self.run_on_executor(loaded, bound, self.strategy, loads)
        states = {g: GroupState(loaded[g][2], windows[g]) for g in self.groups}
        store.save(states, {"bound": bound})
        out = self.in_output_order(pa.concat_tables(outputs))
        buffered = sum(part.num_rows for part in per_group.values()) + sum(
            s.pending.num_rows for s in before.values() if s.pending is not None)
        pending = sum(pending_rows.num_rows for _, _, pending_rows in loaded.values())
        metrics.update({
            "rows_read": rows.num_rows, "late_dropped": rows.num_rows - kept.num_rows,
            "rows_of_partition": int(np.isin(group_of, self.groups).sum()),
            "rows_released": buffered - pending, "rows_pending": pending,
            "windows_out": out.num_rows, "groups": len(self.groups), "ready_bound": bound,
            "state_bytes": sum(len(s.window or b"") + (s.pending.nbytes if s.pending is not None
                                                        else 0) for s in states.values()),
            "group_loads": {str(g): loads[g] for g in sorted(loads)},
            "pushed_groups": sorted(g for g in self.pushes if g in loads),
        })
        return BatchResult(out, states, metrics)

    # -- steps -----------------------------------------------------------------------------

    def drop_late(self, rows: pa.Table, start_bound: int | None) -> pa.Table:
        """Refuse (or, with ``outOfOrder=drop``, drop) rows below the bound already released."""
        if start_bound is None or rows.num_rows == 0:
            return rows
        ts = event_times(rows, self.spec.timestamp_column, "batch rows")
        late = ts < start_bound
        if not late.any():
            return rows
        first = int(np.flatnonzero(late)[0])
        row = rows.slice(first, 1).to_pylist()[0]
        if self.spec.out_of_order == "fail":
            raise InputError(
                f"input {row[INPUT_COL]} sent a late row at position {row[SEQ_COL]}: ts "
                f"{int(ts[first])} is below the ready bound {start_bound} already released "
                f"while the input was idle (idleTimeout); raise idleTimeout or set "
                f"outOfOrder=drop to drop late rows")
        log.warning("dropped %d late rows of idle inputs (outOfOrder=drop)", int(late.sum()))
        return rows.filter(pa.array(~late))

    def group_ids(self, rows: pa.Table) -> np.ndarray:
        """Partition group of each row (stable hash of the key columns)."""
        if not self.spec.key_columns:
            return np.zeros(rows.num_rows, np.int32)
        hashes = key_hash(rows, list(self.spec.key_columns))
        return np.asarray(assign_to_partition_group(hashes, self.spec.partition_groups))

    def release(self, state: GroupState, rows: pa.Table, bound: int | None
                ) -> tuple[bytes | None, pa.Table, pa.Table]:
        """Buffered + new rows of a group split into released (filtered) and pending rows."""
        buffered = rows if state.pending is None else pa.concat_tables(
            [state.pending, rows.cast(state.pending.schema)])
        released, pending = release_ready(buffered, bound, self.spec.timestamp_column)
        if self.spec.where is not None and released.num_rows:
            keep = Predicate.compile(self.spec.where, released.schema).evaluate(released)
            released = released.filter(pa.array(keep))
        return state.window, released, pending

    def run_direct(self, loaded: dict[int, tuple[bytes | None, pa.Table, pa.Table]],
                   bound: int | None, loads: dict[int, list[int]] | None = None
                   ) -> tuple[list[pa.Table], dict[int, bytes]]:
        """Each group's operator, one after another; ``loads`` gets each group's figures.

        ``loads[g] = [P_s bytes, results emitted, bytes on disk]`` (seed 003 §4.3).
        """
        outputs, windows = [], {}
        for g, (snapshot, released, pending) in loaded.items():
            group = self.spec.build_group(self.input_schema, snapshot)
            if g in self.pushes:
                push_to_disk(group)
            out = group.update(released, bound)
            outputs.append(out)
            windows[g] = group.snapshot()
            if loads is not None:
                loads[g] = [memory_bytes(group, pending), out.num_rows, spilled_bytes(group)]
            release(group)
        return outputs, windows

    def run_on_executor(self, loaded: dict[int, tuple[bytes | None, pa.Table, pa.Table]],
                        bound: int | None, strategy: str,
                        loads: dict[int, list[int]] | None = None
                        ) -> tuple[list[pa.Table], dict[int, bytes], dict[str, Any]]:
        """The groups as a plan of window operators, one path per group, on the executor.

        The strategy decides which group's operator runs next and ``workers`` threads run them
        (seed 001 §3, seed 000 §5); each operator continues from the group's state with the
        batch's fixed bound, so the result is the direct path's.
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
            if loads is not None:
                loads[g] = [memory_bytes(operator.aggregator, pending), out.num_rows, 0]
        return outputs, windows, {"executor": result.metrics.progress()}

    def in_output_order(self, out: pa.Table) -> pa.Table:
        """Rows ordered by ``(window_end, window_start, keys)`` (DESIGN.md §2).

        With keyed operators: the pipeline's order (sessions by end, rows in the total order
        of the tuples that produced them), without the internal ``__input``/``__seq``.
        """
        s = self.spec
        order = result_order(s.operators, s.window is not None, s.key_columns,
                             s.timestamp_column)
        return without_internal_columns(sort_ascending(out, order))
