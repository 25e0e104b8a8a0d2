"""The segment and simplified segment strategies.

Jiang & Chakravarthy (2003), §3.3; their Theorem 3: segment scheduling never needs more memory
than Chain.


"At any time instant, consider all the operator segments that have input tuples waiting in its
input queue; schedule a single time unit for the operator segment which has a maximal memory
release capacity to serve until its input queue(s) is(are) empty or there exists another operator
segment which has non-null input queue and a bigger memory release capacity than the current
scheduled one. If there are multiple such segments, select the segment which has the oldest
tuple in its input queue." Segments come from :func:`build_segments`; the priority is the
segment memory release capacity of eq 3.2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.capacity import segment_memory_release_capacity
from spark_stream_sched.runtime.plan.segments import build_segments
from spark_stream_sched.runtime.scheduler.state import QueueView, ScheduleUnit, UnitKind
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy


class SegmentStrategy(Strategy):
    """Segment-based; static priority = segment memory release capacity ``C^M_S`` (eq 3.2)."""

    name = "segment"
    capacity_priority = True
    gamma: float = 1.0
    max_segments: int | None = None

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per segment of the pruned segment list; cache the capacities."""
        segments = build_segments(self.plan, self.stats, self.gamma, self.max_segments)
        units = [
            ScheduleUnit(UnitKind.SEGMENT, s.operators, s.input_queues, i)
            for i, s in enumerate(segments)
        ]
        self._release = {
            u.index: segment_memory_release_capacity(self.plan, self.stats, u.operators)
            for u in units
        }
        return units

    def priority(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return the segment memory release capacity."""
        return self._release[unit.index]


class SimplifiedSegmentStrategy(SegmentStrategy):
    """At most two segments per path, cut where ``C^M_{i+1} < gamma C^M_i`` (§3.3).

    Parameters
    ----------
    gamma
        Similarity factor in (0, 1]; the paper uses 3/4.
    """

    name = "simplified_segment"

    def __init__(self, *, gamma: float = 0.75, **options: Any) -> None:
        if not 0 < gamma <= 1:
            raise ConfigError(f"gamma must be in (0, 1], got {gamma}")
        super().__init__(**options)
        self.gamma = float(gamma)
        self.max_segments = 2
