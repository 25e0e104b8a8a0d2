"""What a partition group reports to the distribution manager, and how it is pushed to disk.

Liu & Rundensteiner (2005), §4.3 keeps per partition group its size ``P_s``, results ``P_o`` and
last update ``T_u``; §5-§6 decide moves and pushes from them. A source partition group (the unit of
state and of Spark tasks) runs one per-key pipeline (:class:`~..keyed.pipeline.Pipeline`) or window
operator; this module reads its figures and applies a push, without caring which it is:

* :func:`memory_bytes` -- ``P_s``: Arrow bytes of the rows still waiting for readiness plus the
  operator's memory-resident state (a join's memory parts, not its generations on disk);
* :func:`spilled_bytes` -- bytes a group's join stages hold on disk, as they took in memory
  (non-zero: the group has spilled, and lazy-disk never moves it, Liu & Rundensteiner (2005), §6
  restriction 2; the sum over groups with ``P_s`` estimates the query's memory ``M_q`` for
  active-disk);
* :func:`push_to_disk` -- push every join stage's memory parts as generations (§4.1); the
  clean-up stage (§4.2, Eq. 1) later emits exactly the results they missed;
* :func:`release` -- delete those files once the group's snapshot holds them;
* :func:`hold_of` -- the group's own ``H`` (:mod:`~spark_stream_sched.runtime.keyed.join_hold`),
  which the engine records per group so that every group can hold back what another group's
  missing results could precede;
* :func:`join_figures` -- what the group's join stages did so far, summed over the stages
  (:class:`~..keyed.join_state.JoinCounts`: pushes, bytes pushed, clean-ups, their results
  and seconds);
* :func:`can_spill` -- whether pushing is allowed for a query: it needs a join stage, whose
  clean-up recovers what pushed state missed (its reorder buffer keeps the output in order, so
  stages and a window may follow it).

``P_o`` is not read from the operator: the distribution manager adds up the rows each group
emitted per batch (every emitted row of a join is one result), which works for any pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, fields

import pyarrow as pa

from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_spec import parse_join
from spark_stream_sched.runtime.keyed.join_state import JoinCounts, arrow_bytes
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.keyed.stage import parse_stage
from spark_stream_sched.runtime.query.ordered import GroupOperator
from spark_stream_sched.runtime.query.spec import QuerySpec


def can_spill(spec: QuerySpec) -> bool:
    """True when the query has a join stage (the only state with a clean-up stage)."""
    return any(parse_stage(text).name == Join.name for text in spec.operators)


def spills_itself(spec: QuerySpec) -> bool:
    """True when a join stage has a memory ``budget``: it pushes state to disk on its own."""
    return any(parse_join(stage)[2] is not None for stage in map(parse_stage, spec.operators)
               if stage.name == Join.name)


def _joins(operator: GroupOperator) -> list[Join]:
    if not isinstance(operator, Pipeline):
        return []
    return [op for op in operator.operators if isinstance(op, Join)]


def memory_bytes(operator: GroupOperator, pending: pa.Table | None) -> int:
    """``P_s`` of a partition group: waiting rows plus the operator's in-memory state.

    Both parts are counted in the canonical Arrow layout or from restored state, so the figure
    is the same whether the group's state came from a file or from the state cache.
    """
    waiting = arrow_bytes(pending) if pending is not None and pending.num_rows else 0
    return waiting + int(operator.state_bytes)


def spilled_bytes(operator: GroupOperator) -> int:
    """Bytes the group's join stages hold on disk (0: nothing spilled)."""
    return sum(op.spilled_bytes for op in _joins(operator))


#: Metric names of :func:`join_figures`: ``join_`` and each :class:`JoinCounts` field.
JOIN_FIGURES = tuple(f"join_{f.name}" for f in fields(JoinCounts))


def join_figures(operator: GroupOperator) -> dict[str, float]:
    """The group's join counters summed over its join stages (zeros without a join).

    The counters are cumulative and travel in the group's snapshot: a micro-batch's own figures
    are the difference between the values after it and right after the group was restored.
    """
    total: dict[str, float] = dict.fromkeys(JOIN_FIGURES, 0)
    for op in _joins(operator):
        for name, value in asdict(op.counts).items():
            total[f"join_{name}"] += value
    return total


def hold_of(operator: GroupOperator) -> int | None:
    """The group's own ``H``: least event time a result its joins still miss can have.

    None when no join stage holds state on disk (nothing is missing).
    """
    holds = [h for h in (op.hold_from for op in _joins(operator)) if h is not None]
    return min(holds) if holds else None


def push_to_disk(operator: GroupOperator) -> int:
    """Push the memory parts of every join stage to disk; bytes pushed (0: nothing to push)."""
    return sum(op.push_group(g) for op in _joins(operator) for g in range(op.n_groups))


def release(operator: GroupOperator) -> None:
    """Delete the join stages' generation files once the group's snapshot holds them.

    A micro-batch restores each group from its snapshot, which re-spills the generations to a
    fresh directory; without this, every batch would leave them behind.
    """
    for op in _joins(operator):
        op.close()
