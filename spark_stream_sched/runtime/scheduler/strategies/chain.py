"""Chain (Babcock et al., as summarised in Jiang & Chakravarthy (2003), §2.2).

"At any time, consider all tuples that are currently in the system; of these, schedule a single
time unit for the tuple that lies on the segment with the steepest slope in its lowest envelope
simulation. If there are multiple such tuples, select the tuple which has the earliest arrival
time." Operators are the units; an operator's priority is the slope of the lower-envelope
segment of its path's progress chart (:func:`chain_priorities`); "the tuple refers to a batch".
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_stream_sched.runtime.plan.segments import chain_priorities
from spark_stream_sched.runtime.scheduler.state import Decision, QueueView, ScheduleUnit
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy, oldest_queue
from spark_stream_sched.runtime.scheduler.strategies.fifo import operator_units


class ChainStrategy(Strategy):
    """Operator-based; priority = steepest lower-envelope slope; ties by earliest arrival.

    Notes
    -----
    Each decision serves the oldest batch of the chosen operator for at most one quantum, then
    the strategy decides again (so the earliest-arrival rule applies batch by batch).
    """

    name = "chain"
    capacity_priority = True

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per operator and cache the envelope slopes."""
        self._slopes = chain_priorities(self.plan, self.stats)
        return operator_units(self)

    def priority(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return the lower-envelope slope of the operator."""
        return self._slopes[unit.operators[0]]

    def make_decision(self, unit: ScheduleUnit, view: QueueView, reason: str) -> Decision:
        """Serve the oldest batch of the operator's oldest input queue."""
        base = super().make_decision(unit, view, reason)
        queue = oldest_queue(unit.input_queues, view)
        batch = view.head_size(queue) if queue is not None else None
        if base.max_tuples is not None and batch is not None:
            batch = min(batch, base.max_tuples)
        return Decision(unit, queue, base.max_time, batch, reason, base.preemptible)
