"""What a strategy sees and what it decides: queue views, scheduling units and decisions.

These types are the contract between a strategy and whoever runs the plan -- the discrete-time
simulator (:mod:`spark_stream_sched.runtime.scheduler.simulator`) or a real executor running
operators on packets:

1. the runner shows the strategy the queues through a :class:`QueueView` (sizes in tuples,
   arrival time of the oldest tuple, size of the oldest packet/batch);
2. :meth:`Strategy.decide` returns a :class:`Decision`: which :class:`ScheduleUnit` (an
   operator, an operator path or a segment) to run, which input queue to take new tuples from,
   and for how long (a time budget and/or a tuple budget);
3. the runner runs the unit bottom-up and reports back with :meth:`Strategy.release`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Protocol

from spark_stream_sched.runtime.plan.operators import QueueId

#: A (possibly fractional) number of tuples. The simulator's exact mode uses Fractions.
Amount = float | Fraction


class QueueView(Protocol):
    """Read-only view of the queues at the time of a decision.

    Notes
    -----
    ``now`` and arrival times share one clock (time units in the simulator, seconds in an
    executor). The age of the oldest tuple of a queue is ``now - oldest(queue)``.
    """

    @property
    def now(self) -> float:
        """Return the current time."""
        ...

    def size(self, queue: QueueId) -> Amount:
        """Return the number of tuples waiting in ``queue``."""
        ...

    def oldest(self, queue: QueueId) -> float | None:
        """Return the arrival time of the oldest tuple in ``queue`` (``None`` when empty)."""
        ...

    def head_size(self, queue: QueueId) -> Amount:
        """Return the tuples in the oldest batch (packet) of ``queue``; 0 when empty."""
        ...


@dataclass(frozen=True)
class QueueSnapshot:
    """A plain :class:`QueueView` built from dictionaries (for executors and tests)."""

    now: float
    sizes: Mapping[QueueId, Amount]
    oldest_times: Mapping[QueueId, float] = field(default_factory=dict)
    head_sizes: Mapping[QueueId, Amount] = field(default_factory=dict)

    def size(self, queue: QueueId) -> Amount:
        """Return the number of tuples waiting in ``queue``."""
        return self.sizes.get(queue, 0.0)

    def oldest(self, queue: QueueId) -> float | None:
        """Return the arrival time of the oldest tuple of ``queue``, ``now`` if unknown."""
        if self.size(queue) <= 0:
            return None
        return self.oldest_times.get(queue, self.now)

    def head_size(self, queue: QueueId) -> Amount:
        """Return the size of the oldest batch, the whole queue if unknown."""
        return self.head_sizes.get(queue, self.size(queue))


class UnitKind(enum.Enum):
    """What a strategy schedules: an operator, an operator path or a segment.

    See Jiang & Chakravarthy (2003), §3.
    """

    OPERATOR = "operator"
    PATH = "path"
    SEGMENT = "segment"


@dataclass(frozen=True)
class ScheduleUnit:
    """A chain of operators run bottom-up as one scheduling unit.

    Attributes
    ----------
    kind
        Operator, path or segment.
    operators
        Operator ids bottom-up; consecutive operators are joined by an internal queue.
    input_queues
        Queues the unit takes *new* tuples from (a path: its leaf queue; an operator: all its
        input queues; a segment: its entry queues).
    index
        Position of the unit in its strategy's unit list (the last tie-breaker).
    """

    kind: UnitKind
    operators: tuple[str, ...]
    input_queues: tuple[QueueId, ...]
    index: int = 0

    @cached_property
    def internal_queues(self) -> tuple[QueueId, ...]:
        """Queues between consecutive operators of the unit (partially processed tuples)."""
        ops = self.operators
        return tuple(QueueId(a, b) for a, b in zip(ops, ops[1:], strict=False))

    @cached_property
    def queues(self) -> tuple[QueueId, ...]:
        """Input queues followed by internal queues (computed once: units are immutable)."""
        return (*self.input_queues, *self.internal_queues)

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``path 1>3`` or ``operator 3``."""
        return f"{self.kind.value} " + ">".join(self.operators)


@dataclass(frozen=True)
class Decision:
    """Which unit to run next, from which input queue, and for how long.

    Attributes
    ----------
    unit
        The unit to run bottom-up. Tuples left inside it (internal queues) are pushed through
        first, then new tuples are taken from ``queue``.
    queue
        Input queue to take new tuples from; ``None`` when only internal tuples are pending.
    max_time
        Time budget (time units or seconds); ``None`` means until the unit has no work.
    max_tuples
        At most this many new tuples from ``queue``; ``None`` means no tuple limit.
    reason
        Why this unit was chosen (``priority``, ``starvation``, ``exhaustive``, ...).
    preemptible
        The runner may end the decision early at its next scheduling point (the simulator: the
        end of the time unit) and decide again, so that a unit with a higher priority that got
        work takes over (the papers' rule). ``False`` for limited and exhaustive service.
    """

    unit: ScheduleUnit
    queue: QueueId | None
    max_time: float | None
    max_tuples: Amount | None = None
    reason: str = "priority"
    preemptible: bool = True
