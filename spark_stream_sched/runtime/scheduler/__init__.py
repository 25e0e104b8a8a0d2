"""Scheduling strategies and the discrete-time simulator of the papers' fluid model.

A strategy decides which operator / operator path / segment runs next and for how long.

Typical use by a runner (simulator or executor)::

    strategy = get_strategy("path_capacity").bind(plan, stats)
    decision = strategy.decide(view)          # view: a QueueView of the current queues
    ... run decision.unit bottom-up, taking new tuples from decision.queue ...
    strategy.release(decision, tuples_taken, elapsed)
"""

from __future__ import annotations

from spark_stream_sched.runtime.scheduler.arrivals import load_arrivals
from spark_stream_sched.runtime.scheduler.simulator import (
    SimulationTrace,
    Simulator,
    StepRecord,
)
from spark_stream_sched.runtime.scheduler.state import (
    Amount,
    Decision,
    QueueSnapshot,
    QueueView,
    ScheduleUnit,
    UnitKind,
)
from spark_stream_sched.runtime.scheduler.strategies import (
    STRATEGIES,
    Strategy,
    get_strategy,
    strategy_names,
)

__all__ = [
    "STRATEGIES",
    "Amount",
    "Decision",
    "QueueSnapshot",
    "QueueView",
    "ScheduleUnit",
    "SimulationTrace",
    "Simulator",
    "StepRecord",
    "Strategy",
    "UnitKind",
    "get_strategy",
    "load_arrivals",
    "strategy_names",
]
