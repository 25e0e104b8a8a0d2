"""The path capacity strategy (Jiang & Chakravarthy 2003, §3.1, Theorems 1 and 2).

"At any time instant, consider all the operator paths that have input tuples waiting in their
queues in the system, schedule a single time unit for the operator path with a maximal
processing capacity to serve until its input queue is empty or there exists an operator path
which has non-null input queue and a bigger processing capacity than the currently scheduled
one. If there are multiple such paths, select the one which has the oldest tuple in its input
queue." The priority is the path processing capacity of eq 2.2; operators of the chosen path
run bottom-up (the internal scheduling strategy).
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_stream_sched.runtime.plan.capacity import path_processing_capacity
from spark_stream_sched.runtime.plan.paths import operator_paths
from spark_stream_sched.runtime.scheduler.state import QueueView, ScheduleUnit, UnitKind
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy


class PathCapacityStrategy(Strategy):
    """Path-based; static priority = path processing capacity ``C^P_P`` (eq 2.2)."""

    name = "path_capacity"
    capacity_priority = True

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per operator path; cache the path capacities."""
        units = [
            ScheduleUnit(UnitKind.PATH, p.operators, (p.input_queue,), i)
            for i, p in enumerate(operator_paths(self.plan))
        ]
        self._capacity = {u.index: path_processing_capacity(self.stats, u.operators) for u in units}
        return units

    def priority(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return the path processing capacity."""
        return self._capacity[unit.index]
