"""Discrete-time simulator of a plan under a strategy: the papers' fluid model.

Each step ``t = 1, 2, ...`` is one time unit:

1. the strategy decides (possibly several times, when a unit runs out of work early) and the
   chosen units run for one time unit in total; a decision whose time budget (quantum) is not
   used up carries over to the next step;
2. the external tuples arriving at time ``t`` are enqueued (those at time 0 before step 1);
3. the step is recorded: total queue size, queue memory, tuples output in the step and their
   mean latency (output time ``t`` minus the arrival time of the tuples they derive from).

This reproduces Jiang & Chakravarthy (2003), Table 2 (FIFO and Chain on the plan of Table 1). With
``exact=True`` all amounts are :class:`fractions.Fraction`, so results equal the paper's decimals
exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import QueueId
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.scheduler.arrivals import Arrivals, check_arrivals
from spark_stream_sched.runtime.scheduler.fluid import FluidNetwork
from spark_stream_sched.runtime.scheduler.state import Amount, Decision
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy, pending

_MAX_DECISIONS_PER_STEP = 100_000


@dataclass(frozen=True)
class StepRecord:
    """What happened in one time unit (the columns of Jiang & Chakravarthy (2003), Table 2)."""

    time: int
    arrivals: Amount
    queue_size: Amount
    memory: Amount
    output: Amount
    latency: Amount | None
    latency_sum: Amount
    units: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary (amounts as floats)."""
        num = ("arrivals", "queue_size", "memory", "output", "latency", "latency_sum")
        out: dict[str, Any] = {"time": self.time}
        for key in num:
            value = getattr(self, key)
            out[key] = None if value is None else float(value)
        out["units"] = list(self.units)
        return out


@dataclass(frozen=True)
class SimulationTrace:
    """All step records of a run, with the aggregates the papers compare."""

    strategy: str
    records: tuple[StepRecord, ...]

    @property
    def total_latency(self) -> Amount:
        """Return the sum over output tuples of their latency (Theorem 1's total latency)."""
        return sum((r.latency_sum for r in self.records), start=Fraction(0))

    @property
    def total_output(self) -> Amount:
        """Return the number of tuples output."""
        return sum((r.output for r in self.records), start=Fraction(0))

    @property
    def peak_memory(self) -> Amount:
        """Return the largest queue memory seen at the end of a step.

        See Jiang & Chakravarthy (2003), Theorem 3: segment needs no more than Chain.
        """
        return max((r.memory for r in self.records), default=Fraction(0))


@dataclass
class _Active:
    """The decision being served and what is left of its budgets."""

    decision: Decision
    time_left: Amount
    tuples_left: Amount | None
    used: Amount
    taken: Amount

    def charge(self, used: Amount, taken: Amount) -> None:
        self.time_left -= used
        self.used += used
        self.taken += taken
        if self.tuples_left is not None:
            self.tuples_left -= taken


class Simulator:
    """Run ``plan`` under ``strategy`` on ``arrivals`` (Jiang & Chakravarthy's (2003) fluid model).

    Parameters
    ----------
    plan
        The query plan; capacities and selectivities come from ``stats``.
    strategy
        A strategy; the simulator binds it (resetting its run state).
    arrivals
        ``{stream: {time: tuples}}``; streams must be read by the plan.
    stats
        Statistics; default: the numbers in the plan's definitions.
    exact
        Compute with :class:`~fractions.Fraction` (statistics are read via their decimal
        ``repr``, so ``0.2`` is exactly 1/5).

    Notes
    -----
    Deterministic: the same inputs give the same trace. The simulated operators behave as
    ``stats`` say when the simulator is built; the strategy reads ``stats`` itself, so changing
    them later (e.g. ``stats[op].record(...)``) models a strategy working from learned, possibly
    wrong, statistics.
    """

    def __init__(
        self,
        plan: QueryPlan,
        strategy: Strategy,
        arrivals: Arrivals,
        *,
        stats: StatsTable | None = None,
        exact: bool = False,
    ) -> None:
        check_arrivals(plan, arrivals)
        self.plan = plan
        self.stats = stats if stats is not None else plan.initial_stats()
        self.strategy = strategy.bind(plan, self.stats)
        self.exact = exact
        self._arrivals = arrivals
        cost = {op: self._num(1.0 / self.stats[op].capacity, inverse_of=self.stats[op].capacity)
                for op in plan.operators}
        sel = {op: self._num(self.stats[op].selectivity) for op in plan.operators}
        self.network = FluidNetwork(plan, cost, sel, 0.0 if exact else 1e-9)
        self._active: _Active | None = None
        self._time = 0
        self._enqueue(0)

    def _num(self, value: float, inverse_of: float | None = None) -> Amount:
        if not self.exact:
            return float(value)
        if inverse_of is not None:
            return 1 / Fraction(repr(float(inverse_of)))
        return Fraction(repr(float(value)))

    def _enqueue(self, time: int) -> Amount:
        total: Amount = self._num(0.0)
        for stream, per_time in self._arrivals.items():
            amount = per_time.get(time, 0)
            if amount:
                self.network.arrive(stream, time, self._num(amount))
                total += self._num(amount)
        return total

    def run(self, steps: int) -> SimulationTrace:
        """Simulate ``steps`` more time units and return their records."""
        return SimulationTrace(self.strategy.name, tuple(self.step() for _ in range(steps)))

    def step(self) -> StepRecord:
        """Simulate one time unit."""
        self._time += 1
        net = self.network
        net.now = self._time
        net.output, net.latency_sum = self._num(0.0), self._num(0.0)
        units = self._spend(self._num(1.0))
        self._preempt()
        arrived = self._enqueue(self._time)
        memory = sum(
            (q.size * self._num(self.stats[qid.target].input_tuple_size)
             for qid, q in net.queues.items()),
            start=self._num(0.0),
        )
        latency = net.latency_sum / net.output if net.output > 0 else None
        return StepRecord(
            self._time, arrived, net.total_size(), memory, net.output, latency,
            net.latency_sum, tuple(dict.fromkeys(units)),
        )

    def _spend(self, budget: Amount) -> list[str]:
        units: list[str] = []
        for _ in range(_MAX_DECISIONS_PER_STEP):
            if budget <= self.network.eps:
                return units
            if self._active is None and not self._start():
                return units
            active = self._active
            assert active is not None
            grant = min(budget, active.time_left)
            used, taken = self.network.serve(active.decision, grant, active.tuples_left)
            units.append(active.decision.unit.label)
            budget -= used
            active.charge(used, taken)
            if self._finished(active, used, grant):
                self._end_active()
        raise RuntimeError("simulator made too many decisions in one time unit")

    def _preempt(self) -> None:
        """End a preemptible decision at the end of the time unit (the papers' rule)."""
        if self._active is not None and self._active.decision.preemptible:
            self._end_active()

    def _end_active(self) -> None:
        active = self._active
        assert active is not None
        self.strategy.release(active.decision, float(active.taken), float(active.used))
        self._active = None

    def _start(self) -> bool:
        decision = self.strategy.decide(self.network_view())
        if decision is None:
            return False
        limit = self._num(decision.max_time) if decision.max_time is not None else self._num(1e300)
        tuples = None if decision.max_tuples is None else decision.max_tuples
        if tuples is not None and self.exact and isinstance(tuples, float):
            tuples = Fraction(repr(tuples))
        zero = self._num(0.0)
        self._active = _Active(decision, limit, tuples, zero, zero)
        return True

    def _finished(self, active: _Active, used: Amount, grant: Amount) -> bool:
        eps = self.network.eps
        if active.time_left <= eps:
            return True
        if active.tuples_left is not None and active.tuples_left <= eps:
            return True
        return used < grant - eps or not pending(active.decision.unit, self.network_view())

    def network_view(self) -> NetworkView:
        """Return a :class:`QueueView` of the current queues."""
        return NetworkView(self.network)


class NetworkView:
    """:class:`QueueView` over a :class:`FluidNetwork` (``now`` is the current step)."""

    def __init__(self, network: FluidNetwork) -> None:
        self._net = network

    @property
    def now(self) -> float:
        """Return the current step."""
        return float(self._net.now)

    def size(self, queue: QueueId) -> Amount:
        """Return the tuples in ``queue``."""
        return self._net.queues[queue].size

    def oldest(self, queue: QueueId) -> float | None:
        """Return the arrival time of the head batch of ``queue``."""
        return self._net.queues[queue].oldest

    def head_size(self, queue: QueueId) -> Amount:
        """Return the size of the head batch of ``queue``."""
        return self._net.queues[queue].head_size
