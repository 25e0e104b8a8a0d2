"""Scheduling strategies by name, and the registry :func:`get_strategy`.

The "source" column gives sections of Jiang & Chakravarthy (2003) (J&C) and Prasaad et al.
(2018) (PRR); docs/references.md has the full titles.

=====================  ======================================================  ==============
name                   what it schedules / priority                            source
=====================  ======================================================  ==============
``fifo``               oldest batch, operator by operator up its path          J&C §2.2
``round_robin``        operators in turn, one quantum each                     baseline
``chain``              operator; steepest lower-envelope slope                 J&C §2.2
``path_capacity``      operator path; path processing capacity (eq 2.2)        J&C §3.1
``segment``            segment; segment memory release capacity (eq 3.2)       J&C §3.3
``simplified_segment`` at most two segments per path (gamma = 3/4)             J&C §3.3
``threshold``          path capacity / simplified segment by memory (3.3)      J&C §3.4
``qst`` ``lp`` ``et``  multicore heuristics (eqs 1-3)                          PRR §6
``ct``
=====================  ======================================================  ==============
"""

from __future__ import annotations

import inspect
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.io import suggest
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy
from spark_stream_sched.runtime.scheduler.strategies.chain import ChainStrategy
from spark_stream_sched.runtime.scheduler.strategies.fifo import FifoStrategy, RoundRobinStrategy
from spark_stream_sched.runtime.scheduler.strategies.multicore import (
    CurrentThroughputStrategy,
    EstimatedTimeStrategy,
    LastInPipelineStrategy,
    QueueSizeThrottlingStrategy,
)
from spark_stream_sched.runtime.scheduler.strategies.path_capacity import PathCapacityStrategy
from spark_stream_sched.runtime.scheduler.strategies.segment import (
    SegmentStrategy,
    SimplifiedSegmentStrategy,
)
from spark_stream_sched.runtime.scheduler.strategies.threshold import ThresholdStrategy

#: Every strategy class by its registry name.
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        FifoStrategy,
        RoundRobinStrategy,
        ChainStrategy,
        PathCapacityStrategy,
        SegmentStrategy,
        SimplifiedSegmentStrategy,
        ThresholdStrategy,
        QueueSizeThrottlingStrategy,
        LastInPipelineStrategy,
        EstimatedTimeStrategy,
        CurrentThroughputStrategy,
    )
}

_BASE_OPTIONS = ("service", "quantum", "quantum_tuples", "starvation", "starvation_period")


def strategy_names() -> tuple[str, ...]:
    """Return the registered strategy names."""
    return tuple(STRATEGIES)


def strategy_options(name: str) -> tuple[str, ...]:
    """Return the keyword options strategy ``name`` accepts (its own, then the shared ones)."""
    cls = _lookup(name)
    own = [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    return tuple(dict.fromkeys([*own, *_BASE_OPTIONS]))


def get_strategy(name: str, **params: Any) -> Strategy:
    """Create strategy ``name`` with keyword ``params`` (names are case-insensitive).

    Raises
    ------
    ConfigError
        Unknown strategy or option (with a "did you mean" suggestion) or a bad value.
    """
    cls = _lookup(name)
    allowed = strategy_options(name)
    for key in params:
        if key not in allowed:
            raise ConfigError(f"strategy {cls.name!r} has no option {key!r}{suggest(key, allowed)}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"strategy {cls.name!r}: bad option value ({exc})") from exc


def _lookup(name: str) -> type[Strategy]:
    key = name.strip().lower().replace("-", "_")
    if key not in STRATEGIES:
        raise ConfigError(f"unknown strategy {name!r}{suggest(key, strategy_names())}")
    return STRATEGIES[key]


__all__ = [
    "STRATEGIES",
    "ChainStrategy",
    "CurrentThroughputStrategy",
    "EstimatedTimeStrategy",
    "FifoStrategy",
    "LastInPipelineStrategy",
    "PathCapacityStrategy",
    "QueueSizeThrottlingStrategy",
    "RoundRobinStrategy",
    "SegmentStrategy",
    "SimplifiedSegmentStrategy",
    "Strategy",
    "ThresholdStrategy",
    "get_strategy",
    "strategy_names",
    "strategy_options",
]
