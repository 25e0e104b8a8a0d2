"""The fluid queue network of the papers' discrete-time model.

See Jiang & Chakravarthy (2003), §2.2, Tables 1-2.

Queues hold fractional tuples in batches tagged with their arrival time (the time the external
tuples they derive from entered the system). An operator with processing capacity ``c`` serves
``c`` tuples per time unit; serving ``a`` tuples of a batch emits ``sigma * a`` tuples with the
same arrival time into every consumer queue, or out of the system when the operator is a root.
All arithmetic is generic over ``float`` and :class:`fractions.Fraction` (exact mode).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import QueueId
from spark_stream_sched.runtime.scheduler.state import Amount, Decision


class FluidQueue:
    """FIFO of ``[arrival_time, amount]`` batches; amounts may be fractional."""

    __slots__ = ("batches", "size")

    def __init__(self) -> None:
        self.batches: deque[list[Amount]] = deque()
        self.size: Amount = 0

    def push(self, origin: int, amount: Amount) -> None:
        """Append ``amount`` tuples that arrived at ``origin`` (merged with an equal tail)."""
        if amount <= 0:
            return
        if self.batches and self.batches[-1][0] == origin:
            self.batches[-1][1] += amount
        else:
            self.batches.append([origin, amount])
        self.size += amount

    def take(self, amount: Amount, eps: float = 0.0) -> list[tuple[int, Amount]]:
        """Remove ``amount`` tuples from the head (the whole queue if ``amount >= size``).

        A batch left with at most ``eps`` tuples is taken whole (float rounding).
        """
        taken: list[tuple[int, Amount]] = []
        while self.batches and amount > 0:
            head = self.batches[0]
            part = head[1] if head[1] <= amount + eps else amount
            taken.append((int(head[0]), part))
            amount -= part
            head[1] -= part
            self.size -= part
            if head[1] <= 0:
                self.batches.popleft()
        if not self.batches:
            self.size = self.size * 0
        return taken

    @property
    def oldest(self) -> float | None:
        """Return the arrival time of the head batch, ``None`` when empty."""
        return float(self.batches[0][0]) if self.batches else None

    @property
    def head_size(self) -> Amount:
        """Return the amount in the head batch (0 when empty)."""
        return self.batches[0][1] if self.batches else self.size * 0


class FluidNetwork:
    """The queues of a plan plus per-step output accounting.

    Parameters
    ----------
    plan
        The query plan.
    cost, selectivity
        Per operator: time units per tuple and outputs per input tuple (float or Fraction).
    eps
        Relative tolerance: a queue within ``eps * max(1, size)`` of what fits is served whole
        (float rounding); 0 when exact.
    """

    def __init__(
        self,
        plan: QueryPlan,
        cost: Mapping[str, Amount],
        selectivity: Mapping[str, Amount],
        eps: float,
    ) -> None:
        self.plan = plan
        self.cost = dict(cost)
        self.selectivity = dict(selectivity)
        self.eps = eps
        self.queues = {q: FluidQueue() for q in plan.queues}
        self.now = 0
        self.output: Amount = 0
        self.latency_sum: Amount = 0

    def arrive(self, stream: str, time: int, amount: Amount) -> None:
        """Enqueue ``amount`` external tuples of ``stream`` that arrived at ``time``."""
        for op in self.plan.consumers(stream):
            self.queues[QueueId(stream, op)].push(time, amount)

    def serve(self, decision: Decision, budget: Amount, max_tuples: Amount | None) -> tuple[
        Amount, Amount
    ]:
        """Run ``decision``'s unit bottom-up for at most ``budget`` time units.

        Tuples left inside the unit are pushed through first; then as many new tuples from
        ``decision.queue`` as can be pushed through the rest of the unit within the budget.
        Returns ``(time used, new tuples taken)``.
        """
        ops = decision.unit.operators
        flush = self._flush_cost(ops)
        entry = ops.index(decision.queue.target) if decision.queue is not None else -1
        x: Amount = budget * 0
        if decision.queue is not None and budget > flush:
            size = self.queues[decision.queue].size
            x = self._fit(size, (budget - flush) / self._chain_cost(ops[entry:]))
            if max_tuples is not None:
                x = min(x, max_tuples)
        remaining = budget
        for j, op in enumerate(ops):
            if j > 0:
                remaining -= self._serve_queue(op, QueueId(ops[j - 1], op), remaining)
            if j == entry and x > 0 and decision.queue is not None:
                remaining -= self.process(op, decision.queue, x)
        return budget - max(remaining, budget * 0), x

    def _serve_queue(self, op: str, queue: QueueId, budget: Amount) -> Amount:
        if budget <= 0:
            return budget * 0
        size = self.queues[queue].size
        return self.process(op, queue, self._fit(size, budget / self.cost[op]))

    def _fit(self, size: Amount, limit: Amount) -> Amount:
        return size if limit >= size - self.eps * max(1, size) else limit

    def _flush_cost(self, ops: tuple[str, ...]) -> Amount:
        carry: Amount = 0
        total: Amount = 0
        for j, op in enumerate(ops):
            inner = self.queues[QueueId(ops[j - 1], op)].size if j > 0 else 0
            carry = carry + inner
            total += carry * self.cost[op]
            carry = carry * self.selectivity[op]
        return total

    def _chain_cost(self, ops: tuple[str, ...]) -> Amount:
        fraction: Amount = 1
        total: Amount = 0
        for op in ops:
            total += fraction * self.cost[op]
            fraction = fraction * self.selectivity[op]
        return total

    def process(self, op: str, queue: QueueId, amount: Amount) -> Amount:
        """Serve ``amount`` tuples of ``queue`` at ``op``; route outputs; return the time used."""
        outputs = self.plan.output_queues(op)
        used: Amount = 0
        for origin, part in self.queues[queue].take(amount, self.eps):
            used += part * self.cost[op]
            produced = part * self.selectivity[op]
            for out in outputs:
                self.queues[out].push(origin, produced)
            if not outputs:
                self.output += produced
                self.latency_sum += produced * (self.now - origin)
        return used

    def total_size(self) -> Amount:
        """Return the number of tuples in all queues."""
        return sum((q.size for q in self.queues.values()), start=self.output * 0)
