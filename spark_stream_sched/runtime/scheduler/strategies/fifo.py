"""FIFO and round-robin: the baselines of Jiang & Chakravarthy (2003), §2.2.

FIFO: "Tuples are processed in the order of their arrival. Once a tuple is scheduled, it is
processed by the operators along its operator path until it is consumed by an intermediate
operator or output to the root node. Then the next oldest tuple is scheduled."
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_stream_sched.runtime.scheduler.state import (
    Decision,
    QueueView,
    ScheduleUnit,
    UnitKind,
)
from spark_stream_sched.runtime.scheduler.strategies.base import (
    Strategy,
    oldest_queue,
    oldest_time,
)


def operator_units(strategy: Strategy) -> list[ScheduleUnit]:
    """One unit per scheduled operator, in topological order."""
    plan = strategy.plan
    return [
        ScheduleUnit(UnitKind.OPERATOR, (op,), plan.input_queues(op), i)
        for i, op in enumerate(plan.operators)
    ]


class FifoStrategy(Strategy):
    """Serve the oldest batch of tuples anywhere in the plan, one operator at a time.

    Notes
    -----
    Each decision serves the oldest batch (tuples with the same arrival time) of the operator
    whose input queue holds the oldest tuple. On equal arrival times the operator deeper in the
    plan goes first, which keeps a scheduled tuple moving up its path until it leaves (§2.2);
    then the earlier operator in topological order.
    """

    name = "fifo"

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per operator."""
        return operator_units(self)

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the operator holding the oldest tuple; ties: deeper first, then index."""
        depth = self.plan.depth
        return min(
            candidates,
            key=lambda u: (oldest_time(u, view), -depth[u.operators[0]], u.index),
        )

    def make_decision(self, unit: ScheduleUnit, view: QueueView, reason: str) -> Decision:
        """Serve exactly the oldest batch of the operator's oldest input queue."""
        queue = oldest_queue(unit.input_queues, view)
        batch = view.head_size(queue) if queue is not None else None
        return Decision(unit, queue, None, batch, reason, preemptible=True)


class RoundRobinStrategy(Strategy):
    """Give each operator with work one quantum in turn, in topological order."""

    name = "round_robin"

    def reset(self) -> None:
        """Start the round at the first operator."""
        self._next = 0

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per operator."""
        return operator_units(self)

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the first candidate at or after the round-robin pointer."""
        n = len(self.units)
        unit = min(candidates, key=lambda u: (u.index - self._next) % n)
        self._next = (unit.index + 1) % n
        return unit
