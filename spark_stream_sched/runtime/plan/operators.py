"""Operator *definitions*: what an operator of a query plan is, not how it runs.

A definition names the operator, its kind, where its input tuples come from (input stream names
or other operator ids) and kind-specific parameters. It may also carry the numbers a simulator
needs (selectivity, processing capacity, tuple sizes); a real executor learns them instead
(:mod:`spark_stream_sched.runtime.plan.stats`). Building definitions runs nothing.

Vocabulary follows Jiang & Chakravarthy (2003), §2: operators are joined by queues; the edge
``source -> target`` is the queue that buffers the output of ``source`` (an operator or an input
stream) as input of ``target``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from spark_stream_sched.errors import ConfigError


class OperatorKind(enum.Enum):
    """The kinds of operator a plan may contain."""

    SELECT = "select"
    FILTER = "filter"
    PROJECT = "project"
    MAP = "map"
    JOIN = "join"
    WINDOW_AGGREGATE = "window_aggregate"
    KEYED = "keyed"
    SINK = "sink"

    @classmethod
    def parse(cls, text: str) -> OperatorKind:
        """Parse a case-insensitive kind name; raise :class:`ConfigError` on unknown names."""
        key = text.strip().lower().replace("-", "_")
        for kind in cls:
            if kind.value == key:
                return kind
        names = ", ".join(k.value for k in cls)
        raise ConfigError(f"unknown operator kind {text!r}; use one of: {names}")

    @property
    def stateless(self) -> bool:
        """True for operators any number of workers may run at once (Prasaad et al. 2018, §6)."""
        return self in _STATELESS


_STATELESS = frozenset(
    {OperatorKind.SELECT, OperatorKind.FILTER, OperatorKind.PROJECT, OperatorKind.MAP}
)


class QueueId(NamedTuple):
    """The queue on the edge ``source -> target``.

    See Jiang & Chakravarthy (2003), §2: edge AB is queue AB.
    """

    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass(frozen=True)
class OperatorDef:
    """Definition of one operator of a query plan.

    Parameters
    ----------
    op_id
        Unique name of the operator within its plan.
    kind
        What the operator does.
    inputs
        Input stream names or operator ids, in input order (a join has two or more).
    params
        Kind-specific parameters (predicate, window spec, key columns, ...); opaque here.
    selectivity, capacity, cost
        Optional initial statistics: outputs per input tuple, tuples processed per time unit,
        time units per tuple (``cost == 1 / capacity``; give at most one of the two).
    input_tuple_size, output_tuple_size
        Optional tuple sizes in memory units (default 1).
    partitions
        Number of key partitions of a ``keyed`` operator (its maximum degree of parallelism).

    Notes
    -----
    Definitions are immutable and picklable; they never hold runtime state.
    """

    op_id: str
    kind: OperatorKind
    inputs: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    selectivity: float | None = None
    capacity: float | None = None
    cost: float | None = None
    input_tuple_size: float | None = None
    output_tuple_size: float | None = None
    partitions: int | None = None

    def __post_init__(self) -> None:
        if not self.op_id:
            raise ConfigError("an operator needs a non-empty 'id'")
        if not self.inputs and self.kind is not OperatorKind.SINK:
            raise ConfigError(f"operator {self.op_id!r} has no inputs; list at least one")
        if len(set(self.inputs)) != len(self.inputs):
            raise ConfigError(f"operator {self.op_id!r} lists an input twice: {self.inputs}")
        if self.capacity is not None and self.cost is not None:
            raise ConfigError(f"operator {self.op_id!r}: give 'capacity' or 'cost', not both")
        for name in ("selectivity", "capacity", "cost", "input_tuple_size", "output_tuple_size"):
            _check_number(self.op_id, name, getattr(self, name))
        for name in ("capacity", "cost"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"operator {self.op_id!r}: {name} must be > 0, got {value}")
        if self.partitions is not None and self.partitions < 1:
            raise ConfigError(f"operator {self.op_id!r}: partitions must be >= 1")

    @property
    def max_parallelism(self) -> int | None:
        """Maximum number of workers at once (Prasaad et al. 2018, §6); ``None`` means unbounded."""
        if self.kind.stateless:
            return None
        if self.kind is OperatorKind.KEYED:
            return self.partitions or 1
        return 1


def _check_number(op_id: str, name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"operator {op_id!r}: {name} must be a finite number, got {value!r}")
    if value < 0:
        raise ConfigError(f"operator {op_id!r}: {name} must be >= 0, got {value}")
