"""Multicore scheduling heuristics of Prasaad et al. (2018), §6: QST, LP, ET and CT.

Operators are the units. A worker allotted to an operator runs it for a constant time slice
``s`` (the ``quantum`` option). An operator is schedulable while fewer workers than its maximum
degree of parallelism run it (1 for stateful operators, the partition count for keyed ones,
unbounded for stateless ones) and its worklist is not empty. ``cs_i`` is the cumulative
selectivity from ingress to ``o_i`` (the largest over the paths reaching it); ``c_i`` the cost
per tuple.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.scheduler.state import Decision, QueueView, ScheduleUnit
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy, oldest_time
from spark_stream_sched.runtime.scheduler.strategies.fifo import operator_units

_TINY = 1e-300


class _OperatorHeuristic(Strategy):
    """Shared set-up: operator units and cumulative selectivities."""

    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return one unit per operator; cache ``cs_i``."""
        cs: dict[str, float] = {}
        for op in self.plan.operators:
            ups = [cs[s] for s in self.plan[op].inputs if s in cs]
            cs[op] = self.stats[op].selectivity * max(ups, default=1.0)
        self._cs = cs
        return operator_units(self)

    def worklist(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return ``I_i``: tuples waiting in the operator's input queues."""
        return float(sum(view.size(q) for q in unit.input_queues))


class QueueSizeThrottlingStrategy(_OperatorHeuristic):
    """QST (Prasaad et al. 2018, §6.1, eq 1): earliest operator whose output queue is below ``T_i``.

    ``T_i = C * cs_i / sum_j cs_j``. When every operator with work is throttled, the latest one
    in the pipeline runs (so the pipeline drains instead of idling).

    Parameters
    ----------
    system_capacity
        ``C`` of eq 1 (tuples), default 100.
    """

    name = "qst"

    def __init__(self, *, system_capacity: float = 100.0, **options: Any) -> None:
        if system_capacity <= 0:
            raise ConfigError(f"system_capacity must be > 0, got {system_capacity}")
        super().__init__(**options)
        self.system_capacity = float(system_capacity)

    def threshold(self, op: str) -> float:
        """Return ``T_i`` of eq 1."""
        self._refresh()
        total = sum(self._cs.values())
        return self.system_capacity * self._cs[op] / total if total > 0 else self.system_capacity

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the earliest unthrottled operator; else the latest operator with work."""
        for unit in candidates:
            op = unit.operators[0]
            out = max((float(view.size(q)) for q in self.plan.output_queues(op)), default=0.0)
            if out < self.threshold(op):
                return unit
        return candidates[-1]


class LastInPipelineStrategy(_OperatorHeuristic):
    """LP (Prasaad et al. 2018, §6.2): the latest operator in the pipeline with a non-empty queue.

    Parameters
    ----------
    min_worklist
        Only worklists at least this big count (the paper evaluates the simplest case, any
        non-empty worklist, which is the default 0); when none is big enough, any counts.
    """

    name = "lp"

    def __init__(self, *, min_worklist: float = 0.0, **options: Any) -> None:
        super().__init__(**options)
        self.min_worklist = float(min_worklist)

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the latest operator (topological order) with a big enough worklist."""
        big = [u for u in candidates if self.worklist(u, view) >= self.min_worklist]
        return (big or candidates)[-1]


class EstimatedTimeStrategy(_OperatorHeuristic):
    """ET (Prasaad et al. 2018, §6.3, eq 2): highest ``p_i = I_i * c_i / (w_i + 1)``."""

    name = "et"

    def priority(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return ``p_i``; unschedulable operators never reach this point (``p_i = 0``)."""
        op = unit.operators[0]
        workers = self._workers.get(op, 0)
        return self.worklist(unit, view) * self.stats[op].cost / (workers + 1)


class CurrentThroughputStrategy(_OperatorHeuristic):
    """CT (Prasaad et al. 2018, §6.4, eq 3): lowest ``n_i = (T_i^w + w_i * s) / (c_i * cs_i)``.

    Parameters
    ----------
    window
        Length ``w`` of the tumbling accounting window (same clock as ``now``), default 10.
    """

    name = "ct"

    def __init__(self, *, window: float = 10.0, **options: Any) -> None:
        if window <= 0:
            raise ConfigError(f"window must be > 0, got {window}")
        super().__init__(**options)
        self.window = float(window)

    def reset(self) -> None:
        """Clear the worker time of the current window."""
        self._window_start = 0.0
        self._worker_time: dict[str, float] = {}

    def decide(self, view: QueueView) -> Decision | None:
        """Roll the window over when ``now`` left it, then decide."""
        start = (view.now // self.window) * self.window
        if start != self._window_start:
            self._window_start = start
            self._worker_time = {}
        return super().decide(view)

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the lowest effective throughput ``n_i``; ties: oldest tuple, then index."""
        return min(candidates, key=lambda u: (self.throughput(u), oldest_time(u, view), u.index))

    def throughput(self, unit: ScheduleUnit) -> float:
        """Return ``n_i`` of eq 3 in the current window."""
        op = unit.operators[0]
        busy = self._worker_time.get(op, 0.0) + self._workers.get(op, 0) * self.quantum
        return busy / max(self.stats[op].cost * self._cs[op], _TINY)

    def on_release(self, decision: Decision, tuples: float, elapsed: float) -> None:
        """Add the worker time to ``T_i^w``."""
        op = decision.unit.operators[0]
        self._worker_time[op] = self._worker_time.get(op, 0.0) + float(elapsed)
