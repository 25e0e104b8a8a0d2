"""Operator segments and Chain's lower-envelope priorities.

Segments: Jiang & Chakravarthy (2003), §3.3; Chain: Babcock et al., as summarised there.


* :func:`build_segments` -- the segment construction algorithm of §3.3: each operator path is
  cut into runs of consecutive operators whose memory release capacities (eq 2.1) satisfy
  ``C^M_{j+1} >= gamma * C^M_j`` (``gamma = 1`` is the segment strategy; the simplified
  segment strategy uses ``gamma < 1`` and keeps at most two segments per path), then the
  system segment list is pruned: a new segment replaces every segment that is a subset of it and
  is discarded when a superset is already listed.
* :func:`chain_priorities` -- the slope of the lower envelope of each path's progress chart,
  which is the priority Chain gives each operator (§2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_stream_sched.runtime.plan.capacity import (
    operator_memory_release_capacity,
    output_memory_per_tuple,
)
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import QueueId
from spark_stream_sched.runtime.plan.paths import OperatorPath, operator_paths
from spark_stream_sched.runtime.plan.stats import StatsTable


@dataclass(frozen=True)
class Segment:
    """A run of consecutive operators of an operator path, scheduled as one unit.

    Attributes
    ----------
    operators
        Operator ids bottom-up.
    input_queues
        The segment's input queues: where the paths it serves enter it (and, after pruning,
        the entries of the segments it absorbed).
    """

    operators: tuple[str, ...]
    input_queues: tuple[QueueId, ...]

    def __str__(self) -> str:
        return "[" + ">".join(self.operators) + "]"


def cut_path(
    plan: QueryPlan, stats: StatsTable, path: OperatorPath, gamma: float, max_segments: int | None
) -> list[tuple[str, ...]]:
    """Cut one path into segments bottom-up (first step of the §3.3 construction)."""
    ops = path.operators
    cm = [operator_memory_release_capacity(plan, stats, op) for op in ops]
    runs: list[list[str]] = [[ops[0]]]
    for j in range(1, len(ops)):
        last_allowed = max_segments is not None and len(runs) >= max_segments
        if last_allowed or cm[j] >= gamma * cm[j - 1]:
            runs[-1].append(ops[j])
        else:
            runs.append([ops[j]])
    return [tuple(r) for r in runs]


def build_segments(
    plan: QueryPlan, stats: StatsTable, gamma: float = 1.0, max_segments: int | None = None
) -> tuple[Segment, ...]:
    """Construct and prune the system segment list (§3.3).

    Parameters
    ----------
    gamma
        Similarity factor; 1 for the segment strategy, 3/4 for the simplified one.
    max_segments
        At most this many segments per path (2 for the simplified segment strategy: the
        operators after the first segment form the second one).

    Notes
    -----
    Every queue of the plan ends up either between consecutive operators of a segment or among
    the input queues of the first segment (in list order) containing its target operator, so
    no queue is left unserved.
    """
    listed: list[tuple[tuple[str, ...], list[QueueId]]] = []
    for path in operator_paths(plan):
        queues = dict(zip(path.operators, path.queues, strict=True))
        for ops in cut_path(plan, stats, path, gamma, max_segments):
            _prune_add(listed, ops, queues[ops[0]])
    segments = [Segment(ops, tuple(dict.fromkeys(qs))) for ops, qs in listed]
    return _cover_all_queues(plan, segments)


def _prune_add(
    listed: list[tuple[tuple[str, ...], list[QueueId]]], ops: tuple[str, ...], entry: QueueId
) -> None:
    new = set(ops)
    for old_ops, old_queues in listed:
        if new <= set(old_ops):
            old_queues.append(entry)
            return
    absorbed: list[QueueId] = [entry]
    keep = []
    for old_ops, old_queues in listed:
        if set(old_ops) <= new:
            absorbed.extend(old_queues)
        else:
            keep.append((old_ops, old_queues))
    keep.append((ops, absorbed))
    listed[:] = keep


def _cover_all_queues(plan: QueryPlan, segments: list[Segment]) -> tuple[Segment, ...]:
    covered = {q for s in segments for q in s.input_queues}
    for s in segments:
        covered.update(QueueId(a, b) for a, b in zip(s.operators, s.operators[1:], strict=False))
    extra: dict[int, list[QueueId]] = {}
    for q in plan.queues:
        if q not in covered:
            idx = next(i for i, s in enumerate(segments) if q.target in s.operators)
            extra.setdefault(idx, []).append(q)
    return tuple(
        Segment(s.operators, (*s.input_queues, *extra.get(i, ()))) for i, s in enumerate(segments)
    )


def progress_chart(
    plan: QueryPlan, stats: StatsTable, path: OperatorPath
) -> list[tuple[float, float]]:
    """Points ``(time, memory)`` of one input tuple pushed up ``path`` (Chain's progress chart)."""
    points = [(0.0, stats[path.operators[0]].input_tuple_size)]
    fraction = 1.0
    elapsed = 0.0
    for op in path.operators:
        elapsed += fraction * stats[op].cost
        points.append((elapsed, fraction * output_memory_per_tuple(plan, stats, op)))
        fraction *= stats[op].selectivity
    return points


def chain_priorities(plan: QueryPlan, stats: StatsTable) -> dict[str, float]:
    """Chain's priority of each operator: the slope of its lower-envelope segment.

    An operator on several paths takes the largest of its slopes.
    """
    prio: dict[str, float] = {}
    for path in operator_paths(plan):
        for op, slope in zip(path.operators, _envelope_slopes(progress_chart(plan, stats, path)),
                             strict=True):
            prio[op] = max(prio.get(op, slope), slope)
    return prio


def _envelope_slopes(points: list[tuple[float, float]]) -> list[float]:
    """Slope assigned to each step of the chart by its lower envelope (steepest, then longest)."""
    slopes: list[float] = []
    i = 0
    while i < len(points) - 1:
        best_j, best = i + 1, float("-inf")
        for j in range(i + 1, len(points)):
            dt = points[j][0] - points[i][0]
            slope = (points[i][1] - points[j][1]) / dt if dt > 0 else float("inf")
            if slope >= best:
                best_j, best = j, slope
        slopes.extend([best] * (best_j - i))
        i = best_j
    return slopes
