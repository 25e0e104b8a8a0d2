"""The strategy interface and the shared priority machinery.

A :class:`Strategy` is a deterministic object: bound to a plan and its statistics, it turns a
:class:`QueueView` into a :class:`Decision` (Jiang & Chakravarthy 2003, §3: "schedule a single time
unit for the unit with the highest priority ... if there are multiple such units, select the one
with the oldest tuple"). Shared options:

* service discipline (Jiang & Chakravarthy 2003, §3.1-3.2): ``preemptive`` (default) is the
  papers' rule -- serve
  the chosen unit "until its input queue is empty or there exists [a unit] which has non-null
  input queue and a bigger [priority]": decisions last at most ``quantum`` and the runner may
  end them at every scheduling point (each time unit in the simulator) to decide again;
  ``limited`` grants exactly one quantum (``quantum`` time units, at most ``quantum_tuples``
  tuples) without preemption; ``exhaustive`` keeps serving the chosen unit until it has no work;
* starvation avoidance (Jiang & Chakravarthy 2003, §4.2): ``oldest`` schedules the unit holding
  the oldest tuple
  every ``starvation_period``-th decision; ``dynamic`` multiplies a capacity priority by
  ``tau_i * Q_i`` (normalised age of the oldest tuple and normalised queue size).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.io import suggest
from spark_stream_sched.runtime.plan.operators import QueueId
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.scheduler.state import Decision, QueueView, ScheduleUnit

if TYPE_CHECKING:  # typing.Self is Python 3.11+; annotations are not evaluated
    from typing_extensions import Self

SERVICES = ("preemptive", "limited", "exhaustive")
STARVATION = ("none", "oldest", "dynamic")


class Strategy(ABC):
    """Base class of every scheduling strategy.

    Parameters
    ----------
    service
        ``"preemptive"`` (default), ``"limited"`` or ``"exhaustive"`` (Jiang & Chakravarthy 2003,
        §3.2).
    quantum
        Time budget of one limited-service decision (time units / seconds), > 0.
    quantum_tuples
        Optional tuple budget of one limited-service decision.
    starvation
        ``"none"``, ``"oldest"`` (periodic oldest-first) or ``"dynamic"`` (``C * tau * Q``).
    starvation_period
        Every how many decisions ``"oldest"`` overrides the priority.

    Notes
    -----
    Call :meth:`bind` before :meth:`decide`; binding resets all run state, so the same inputs give
    the same decisions. Every decision must be answered by :meth:`release` (a worker count per
    operator limits operators of bounded parallelism, Prasaad et al. (2018), §6). Not thread-safe:
    an executor calls it under its scheduler lock.
    """

    name: ClassVar[str] = "strategy"
    #: Whether the priority is a capacity, so that the dynamic priority of §4.2 applies.
    capacity_priority: ClassVar[bool] = False

    def __init__(
        self,
        *,
        service: str = "preemptive",
        quantum: float = 1.0,
        quantum_tuples: float | None = None,
        starvation: str = "none",
        starvation_period: int = 100,
    ) -> None:
        if service not in SERVICES:
            raise ConfigError(f"unknown service {service!r}{suggest(str(service), SERVICES)}")
        if starvation not in STARVATION:
            hint = suggest(str(starvation), STARVATION)
            raise ConfigError(f"unknown starvation option {starvation!r}{hint}")
        if starvation == "dynamic" and not self.capacity_priority:
            raise ConfigError(
                f"starvation='dynamic' needs a capacity priority; {self.name} has none"
            )
        if quantum <= 0 or (quantum_tuples is not None and quantum_tuples <= 0):
            raise ConfigError("quantum and quantum_tuples must be > 0")
        if starvation_period < 1:
            raise ConfigError(f"starvation_period must be >= 1, got {starvation_period}")
        self.service = service
        self.quantum = float(quantum)
        self.quantum_tuples = quantum_tuples
        self.starvation = starvation
        self.starvation_period = int(starvation_period)
        self._plan: QueryPlan | None = None
        self._stats: StatsTable | None = None

    # ------------------------------------------------------------------ binding
    def bind(self, plan: QueryPlan, stats: StatsTable | None = None) -> Self:
        """Attach to ``plan`` (statistics default to the plan's numbers); reset run state."""
        self._plan = plan
        self._stats = stats if stats is not None else plan.initial_stats()
        self._version = -1
        self._units: tuple[ScheduleUnit, ...] = ()
        self._decisions = 0
        self._current: ScheduleUnit | None = None
        self._workers: dict[str, int] = {}
        self.reset()
        return self

    @property
    def plan(self) -> QueryPlan:
        """The bound plan (raises :class:`ConfigError` before :meth:`bind`)."""
        if self._plan is None:
            raise ConfigError(f"strategy {self.name!r} is not bound to a plan; call bind()")
        return self._plan

    @property
    def stats(self) -> StatsTable:
        """The statistics the capacities are computed from."""
        if self._stats is None:
            raise ConfigError(f"strategy {self.name!r} is not bound to a plan; call bind()")
        return self._stats

    @property
    def units(self) -> tuple[ScheduleUnit, ...]:
        """Current scheduling units (rebuilt when the statistics change)."""
        self._refresh()
        return self._units

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Reset strategy-specific run state (called by :meth:`bind`)."""

    def _refresh(self) -> None:
        version = self.stats.version
        if version != self._version:
            self._version = version
            self._units = tuple(self.build_units())

    @abstractmethod
    def build_units(self) -> Sequence[ScheduleUnit]:
        """Return the units this strategy schedules, from the plan and current statistics."""

    # ------------------------------------------------------------------ deciding
    def decide(self, view: QueueView) -> Decision | None:
        """Choose the next unit to run, or ``None`` when no unit has work."""
        self._refresh()
        candidates = [u for u in self._units if self._schedulable(u) and pending(u, view)]
        if not candidates:
            return None
        self._decisions += 1
        reason = "priority"
        sticky = self._sticky(candidates)
        if self.starvation == "oldest" and self._decisions % self.starvation_period == 0:
            unit, reason = min(candidates, key=lambda u: _age_key(u, view)), "starvation"
        elif sticky is not None:
            unit, reason = sticky, "exhaustive"
        else:
            unit = self.choose(candidates, view)
        self._current = unit
        for op in unit.operators:
            self._workers[op] = self._workers.get(op, 0) + 1
        return self.make_decision(unit, view, reason)

    def _sticky(self, candidates: list[ScheduleUnit]) -> ScheduleUnit | None:
        """Return the unit exhaustive service keeps serving, if it still has work."""
        if self.service == "exhaustive" and self._current in candidates:
            return self._current
        return None

    def _schedulable(self, unit: ScheduleUnit) -> bool:
        for op in unit.operators:
            limit = self.plan[op].max_parallelism
            if limit is not None and self._workers.get(op, 0) >= limit:
                return False
        return True

    def choose(self, candidates: list[ScheduleUnit], view: QueueView) -> ScheduleUnit:
        """Pick the highest priority; ties: oldest tuple, then unit index."""
        prio = {u.index: self.priority(u, view) for u in candidates}
        if self.starvation == "dynamic":
            prio = _dynamic(prio, candidates, view)
        return min(candidates, key=lambda u: (-prio[u.index], *_age_key(u, view)))

    def priority(self, unit: ScheduleUnit, view: QueueView) -> float:
        """Return the priority of ``unit`` (higher runs first); override in subclasses."""
        return 0.0

    def make_decision(self, unit: ScheduleUnit, view: QueueView, reason: str) -> Decision:
        """Turn the chosen unit into a :class:`Decision` (queue, time and tuple budgets)."""
        queue = oldest_queue(unit.input_queues, view)
        max_time = None if self.service == "exhaustive" else self.quantum
        max_tuples = None if self.service == "exhaustive" else self.quantum_tuples
        return Decision(
            unit, queue, max_time, max_tuples, reason, preemptible=self.service == "preemptive"
        )

    def release(self, decision: Decision, tuples: float, elapsed: float) -> None:
        """Report that ``decision`` ended after taking ``tuples`` new tuples in ``elapsed``."""
        for op in decision.unit.operators:
            self._workers[op] = max(0, self._workers.get(op, 0) - 1)
        self.on_release(decision, tuples, elapsed)

    def on_release(self, decision: Decision, tuples: float, elapsed: float) -> None:  # noqa: B027
        """Learn from completed work (a hook; CT uses it)."""


def pending(unit: ScheduleUnit, view: QueueView) -> bool:
    """Tell whether any queue of ``unit`` (input or internal) holds tuples."""
    return any(view.size(q) > 0 for q in unit.queues)


def oldest_queue(queues: Sequence[QueueId], view: QueueView) -> QueueId | None:
    """Return the non-empty queue with the oldest tuple (first in order on ties)."""
    best: tuple[float, int] | None = None
    chosen = None
    for i, q in enumerate(queues):
        t = view.oldest(q)
        if t is not None and view.size(q) > 0 and (best is None or (t, i) < best):
            best, chosen = (t, i), q
    return chosen


def oldest_time(unit: ScheduleUnit, view: QueueView) -> float:
    """Return the arrival time of the oldest tuple in ``unit`` (+inf when empty)."""
    times = [view.oldest(q) for q in unit.queues if view.size(q) > 0]
    return min((t for t in times if t is not None), default=float("inf"))


def _age_key(unit: ScheduleUnit, view: QueueView) -> tuple[float, int]:
    return (oldest_time(unit, view), unit.index)


def _dynamic(
    prio: dict[int, float], candidates: list[ScheduleUnit], view: QueueView
) -> dict[int, float]:
    """``C_i * tau_i * Q_i``, age and queue size normalised by their max.

    Jiang & Chakravarthy (2003), §4.2.
    """
    ages = {u.index: view.now - oldest_time(u, view) for u in candidates}
    sizes = {u.index: float(sum(view.size(q) for q in u.queues)) for u in candidates}
    max_age = max(ages.values())
    max_size = max(sizes.values())
    out = {}
    for i, c in prio.items():
        tau = ages[i] / max_age if max_age > 0 else 1.0
        q = sizes[i] / max_size if max_size > 0 else 1.0
        out[i] = c * tau * q
    return out
