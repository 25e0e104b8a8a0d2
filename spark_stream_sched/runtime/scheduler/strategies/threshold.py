"""The threshold strategy (Jiang & Chakravarthy 2003, §3.4, formula 3.3).

A hybrid: the path capacity strategy (normal mode, best tuple latency) while the queue memory is
low, the simplified segment strategy (memory saving mode) from the moment the current total
queue memory ``M_c >= T_max`` until it falls to ``M_c <= T_min``, with (3.3)::

    T_max = min((1 + alpha) / 2 * M, beta * M),   alpha = mean(M) / M
    T_min = min(mean(M), beta * T_max),           0.5 < beta < 1

where ``M`` is the maximal available queue memory and ``mean(M)`` the mean total queue memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.scheduler.state import Decision, QueueView, ScheduleUnit
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy
from spark_stream_sched.runtime.scheduler.strategies.path_capacity import PathCapacityStrategy
from spark_stream_sched.runtime.scheduler.strategies.segment import SimplifiedSegmentStrategy

if TYPE_CHECKING:  # typing.Self is Python 3.11+; annotations are not evaluated
    from typing_extensions import Self


class ThresholdStrategy(Strategy):
    """Switch between path capacity (normal) and simplified segment (memory saving).

    Parameters
    ----------
    memory_limit
        ``M``: maximal queue memory available (memory units; bytes in an executor). Required.
    alpha
        ``alpha = mean(M) / M`` of (3.3). A number (default 0.9) fixes the mean queue memory at
        ``alpha * M``; ``None`` learns ``mean(M)`` as the running mean of the queue memory seen
        at each distinct decision time.
    beta
        Safety factor in (0.5, 1); default 0.9 (the paper's value).
    gamma
        Similarity factor of the simplified segment strategy (default 3/4).
    """

    name = "threshold"
    capacity_priority = True

    def __init__(
        self,
        *,
        memory_limit: float | None = None,
        alpha: float | None = 0.9,
        beta: float = 0.9,
        gamma: float = 0.75,
        **options: Any,
    ) -> None:
        if memory_limit is None or memory_limit <= 0:
            raise ConfigError("threshold needs memory_limit > 0 (the queue memory M of §3.4)")
        if alpha is not None and not 0 <= alpha <= 1:
            raise ConfigError(f"alpha must be in [0, 1] or None, got {alpha}")
        if not 0.5 < beta < 1:
            raise ConfigError(f"beta must be in (0.5, 1), got {beta}")
        super().__init__(**options)
        self.memory_limit = float(memory_limit)
        self.alpha = alpha
        self.beta = float(beta)
        self.normal = PathCapacityStrategy(**options)
        self.saving = SimplifiedSegmentStrategy(gamma=gamma, **options)

    def bind(self, plan: QueryPlan, stats: StatsTable | None = None) -> Self:
        """Bind both inner strategies to the same plan and statistics."""
        super().bind(plan, stats)
        self.normal.bind(plan, self.stats)
        self.saving.bind(plan, self.stats)
        return self

    def reset(self) -> None:
        """Start in normal mode with no memory samples."""
        self.saving_mode = False
        self._sum = 0.0
        self._count = 0
        self._last_sample_time: float | None = None
        self._owner: dict[int, Strategy] = {}

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return the units of the inner strategy of the current mode."""
        return self.units

    @property
    def units(self) -> tuple[ScheduleUnit, ...]:
        """Units of the strategy of the current mode (paths or simplified segments)."""
        return (self.saving if self.saving_mode else self.normal).units

    def queue_memory(self, view: QueueView) -> float:
        """Return the current total queue memory ``M_c``: tuples times input tuple size."""
        stats = self.stats
        return float(
            sum(view.size(q) * stats[q.target].input_tuple_size for q in self.plan.queues)
        )

    def thresholds(self) -> tuple[float, float]:
        """Return ``(T_max, T_min)`` of formula 3.3 for the current mean queue memory."""
        m = self.memory_limit
        if self.alpha is not None:
            mean = self.alpha * m
        else:
            mean = self._sum / self._count if self._count else 0.0
        t_max = min((1 + mean / m) / 2 * m, self.beta * m)
        return t_max, min(mean, self.beta * t_max)

    def decide(self, view: QueueView) -> Decision | None:
        """Update the mode from ``M_c`` and delegate to the mode's strategy."""
        used = self.queue_memory(view)
        if self._last_sample_time != view.now:
            self._last_sample_time = view.now
            self._sum += used
            self._count += 1
        t_max, t_min = self.thresholds()
        if not self.saving_mode and used >= t_max:
            self.saving_mode = True
        elif self.saving_mode and used <= t_min:
            self.saving_mode = False
        inner = self.saving if self.saving_mode else self.normal
        decision = inner.decide(view)
        if decision is not None:
            self._owner[id(decision)] = inner
        return decision

    def release(self, decision: Decision, tuples: float, elapsed: float) -> None:
        """Forward the release to the inner strategy that made the decision."""
        self._owner.pop(id(decision), self.normal).release(decision, tuples, elapsed)
