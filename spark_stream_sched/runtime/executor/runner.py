"""One running plan (a request): its queues, operators and the strategy-driven task body.

Every task of the request runs :meth:`PlanRun.step`: under the request lock it shows the strategy
the queues (:class:`~.queues.QueuesView`), takes its :class:`Decision` and runs the chosen unit
(operator, operator path or segment, Jiang & Chakravarthy (2003), §3) bottom-up: packets already
inside the unit first (most downstream first), then new packets from the decision's input queue,
until the decision's budget ends (time, tuples; a preemptive decision ends once a new packet went
through the unit, the executor's "time unit"). Then it reports back with ``release``.

Tasks are created (Falt & Yaghob 2011, §3.1) as *deferred* for each input packet and as *immediate*
for each packet a worker pushes to a queue outside its current unit. Liveness: a task that ends
while work is pending and no other task of the request is queued or running queues one more.

Statistics (Jiang & Chakravarthy 2003, §2.1 "learned ... during the execution period"): every
processed packet is recorded in ``measured``; every ``refresh_every`` packets the measured cost per
tuple, selectivity and tuple sizes are published into the statistics the strategy reads.

Incremental input (Falt & Yaghob 2011, §3.1: a packet's arrival creates a task): a feeder may push
input packets while the plan runs and wait, with :meth:`PlanRun.wait_for_room`, until a stream's
input queues hold fewer than a read-ahead bound of untaken packets; every take from an input queue
wakes it. ``work_done`` counts, per operator, the scheduling size of every processed packet (a
deterministic service measure for the step driver of :mod:`.feed`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from spark_stream_sched.runtime.executor.operators import RuntimeOperator
from spark_stream_sched.runtime.executor.queues import Packet, PacketQueue, QueuesView
from spark_stream_sched.runtime.executor.sink import Sink
from spark_stream_sched.runtime.executor.tasks import Request
from spark_stream_sched.runtime.executor.workers import WorkerContext, WorkerPool
from spark_stream_sched.runtime.metrics import PlanMetrics
from spark_stream_sched.runtime.packets import TS_MAX
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import QueueId
from spark_stream_sched.runtime.plan.stats import StatsTable
from spark_stream_sched.runtime.scheduler.state import Decision, ScheduleUnit
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy

#: A unit of work inside a decision: (queue, packet, whether the operator lock is held).
Item = tuple[PacketQueue, Packet, bool]


class PlanRun:
    """State of one plan run on a worker pool (see the module docstring).

    Notes
    -----
    Lock order: an operator lock, then the request lock, then the pool lock; never the reverse.
    """

    def __init__(self, plan: QueryPlan, strategy: Strategy, operators: dict[str, RuntimeOperator],
                 measured: StatsTable, metrics: PlanMetrics, sink: Sink, pool: WorkerPool,
                 clock: Callable[[], float], refresh_every: int = 64) -> None:
        self.plan, self.strategy, self.operators = plan, strategy, operators
        self.measured, self.metrics, self.sink, self.pool = measured, metrics, sink, pool
        self.clock, self.refresh_every = clock, max(1, refresh_every)
        self.queues = {q: PacketQueue(q, operators[q.target].ordered) for q in plan.queues}
        self.op_locks = {op: threading.Lock() for op, o in operators.items() if o.ordered}
        self.done = dict.fromkeys(operators, 0)
        self.last_arrival = dict.fromkeys(operators, 0.0)
        self.finished: set[str] = set()
        self.lock = threading.Lock()
        self.room = threading.Condition(self.lock)
        self.work_done = dict.fromkeys(operators, 0)
        self.outstanding = 0
        self.packets = 0
        self.error: BaseException | None = None
        self.complete = threading.Event()
        self.request: Request = pool.open_request(f"plan@{id(self)}")
        self._input_counts = dict.fromkeys(plan.streams, 0)
        self._published: dict[str, int] = {}
        self._names = {q: str(q) for q in self.queues}

    # ------------------------------------------------------------------ input side
    def push_input(self, stream: str, packet: Packet) -> None:
        """Enqueue an input packet (feeder thread); one deferred task per queue it enters."""
        with self.lock:
            self._input_counts[stream] += 1
            self.metrics.arrival(packet.arrival, stream, packet.rows, packet.nbytes)
            for op in self.plan.consumers(stream):
                if self.queues[QueueId(stream, op)].push(packet):
                    self._submit(None)

    def input_backlog(self, stream: str) -> int:
        """Most packets of ``stream`` pushed and not yet taken by one of its consumers."""
        return max(self.queues[QueueId(stream, op)].backlog for op in self.plan.consumers(stream))

    def wait_for_room(self, stream: str, limit: int, timeout: float | None = None) -> bool:
        """Block until ``stream`` has fewer than ``limit`` untaken packets, or the run failed.

        Returns
        -------
        bool
            ``False`` when ``timeout`` seconds passed first; ``True`` otherwise (also when the
            run failed: the caller checks :attr:`error`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.room:
            while self.error is None and self.input_backlog(stream) >= max(1, limit):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self.room.wait(left)
        return True

    def close_input(self, stream: str) -> None:
        """The stream has ended: close its queues and finish operators that are done."""
        with self.lock:
            for op in self.plan.consumers(stream):
                self.queues[QueueId(stream, op)].close(self._input_counts[stream])
                self._maybe_finish(None, op)

    # ------------------------------------------------------------------ tasks
    def _submit(self, ctx: WorkerContext | None) -> None:
        self.outstanding += 1
        if ctx is None:
            self.pool.submit_deferred(self.request, self.step)
        else:
            ctx.submit_immediate(self.request, self.step)

    def _end_task(self) -> None:
        self.outstanding -= 1
        if self.outstanding == 0 and self.error is None and self._pending():
            self._submit(None)

    def _pending(self) -> bool:
        return any(q.ready_work for q in self.queues.values())

    def fail(self, exc: BaseException) -> None:
        """Record the first error and wake whoever waits for the run (caller holds the lock)."""
        if self.error is None:
            self.error = exc
        self.complete.set()
        self.room.notify_all()

    def step(self, ctx: WorkerContext) -> None:
        """Task body: one strategy decision, run to the end of its budget."""
        try:
            self._step(ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of Engine.run
            with self.lock:
                self.fail(exc)

    def _step(self, ctx: WorkerContext) -> None:
        with self.lock:
            decision = None if self.error else self.strategy.decide(self._view())
            if decision is None:
                self._end_task()
                return
        taken, start = 0.0, self.clock()
        try:
            taken = self._serve(ctx, decision, start)
        finally:
            with self.lock:
                self.strategy.release(decision, taken, self.clock() - start)
                self._end_task()

    def _view(self) -> QueuesView:
        now = self.clock()
        self.metrics.queues(now, {self._names[q]: (p.rows, p.nbytes)
                                  for q, p in self.queues.items()})
        return QueuesView(self.queues, now)

    # ------------------------------------------------------------------ serving a decision
    def _serve(self, ctx: WorkerContext, decision: Decision, start: float) -> float:
        taken = 0.0
        while True:
            with self.lock:
                item, fresh = self._next_item(decision, taken)
            if item is None:
                return taken
            taken += item[1].work if fresh else 0
            self._run(ctx, decision.unit, item)
            if self._over(decision, taken, start):
                return taken

    def _next_item(self, decision: Decision, taken: float) -> tuple[Item | None, bool]:
        for qid in reversed(decision.unit.internal_queues):
            item = self._take(self.queues[qid])
            if item is not None:
                return item, False
        budget = decision.max_tuples
        if decision.queue is None or (budget is not None and taken >= budget):
            return None, False
        return self._take(self.queues[decision.queue]), True

    def _take(self, queue: PacketQueue) -> Item | None:
        if not queue.ready_work:
            return None
        op_lock = self.op_locks.get(queue.qid.target)
        if op_lock is not None and not op_lock.acquire(blocking=False):
            return None
        packet = queue.take()
        if packet is None and op_lock is not None:
            op_lock.release()
        if packet is not None and queue.qid.source in self._input_counts:
            self.room.notify_all()  # the feeder may read ahead one more packet
        return None if packet is None else (queue, packet, op_lock is not None)

    def _over(self, decision: Decision, taken: float, start: float) -> bool:
        if decision.max_time is not None and self.clock() - start >= decision.max_time:
            return True
        if not decision.preemptible or taken <= 0:
            return False
        with self.lock:
            return not any(self.queues[q].ready_work for q in decision.unit.internal_queues)

    def _run(self, ctx: WorkerContext, unit: ScheduleUnit, item: Item) -> None:
        queue, packet, locked = item
        op = queue.qid.target
        try:
            t0 = self.clock()
            table = self.operators[op].process(packet.table, packet.watermark)
            seconds = self.clock() - t0
            out = Packet(packet.seq, table, packet.arrival, packet.watermark)
            with self.lock:
                self._record(op, packet, out, seconds)
                self._emit(ctx, unit, op, out)
                self.done[op] += 1
                self.work_done[op] += packet.work
                self.last_arrival[op] = max(self.last_arrival[op], packet.arrival)
                self._maybe_finish(ctx, op)
        finally:
            if locked:
                self.op_locks[op].release()

    def _record(self, op: str, packet: Packet, out: Packet, seconds: float) -> None:
        self.measured[op].record(packet.rows, out.rows, seconds, packet.nbytes, out.nbytes)
        self.metrics.processed(self.clock(), op, packet.rows, out.rows, packet.nbytes,
                               out.nbytes, seconds)
        self.packets += 1
        if self.packets % self.refresh_every == 0:
            publish(self.measured, self.strategy.stats, self._published)

    # ------------------------------------------------------------------ emitting, finishing
    def _emit(self, ctx: WorkerContext | None, unit: ScheduleUnit | None, op: str,
              packet: Packet) -> None:
        if self.plan.is_root(op):
            self.sink.push(op, packet, self.clock())
            if self.sink.complete:
                self.metrics.finish(self.clock())
                self.complete.set()
            return
        internal = set(unit.internal_queues) if unit is not None else set()
        for qid in self.plan.output_queues(op):
            if self.queues[qid].push(packet) and qid not in internal:
                self._submit(ctx)

    def _maybe_finish(self, ctx: WorkerContext | None, op: str) -> None:
        (qid,) = self.plan.input_queues(op)
        total = self.queues[qid].total
        if op in self.finished or total is None or self.done[op] != total:
            return
        self.finished.add(op)
        last = self.operators[op].finish()
        if last is not None:
            self._emit(ctx, None, op, Packet(total, last, self.last_arrival[op], TS_MAX))
            total += 1
        if self.plan.is_root(op):
            self.sink.close(op, total)
            if self.sink.complete:
                self.metrics.finish(self.clock())
                self.complete.set()
            return
        for out in self.plan.output_queues(op):
            self.queues[out].close(total)
            self._maybe_finish(ctx, out.target)

    def wait(self, timeout: float | None) -> bool:
        """Block until the run completed or failed; return whether it did within ``timeout``."""
        return self.complete.wait(timeout)

    def close(self) -> None:
        """Unregister the request from the pool."""
        self.pool.close_request(self.request)


def publish(measured: StatsTable, target: StatsTable, published: dict[str, int]) -> None:
    """Copy learned statistics into ``target``, bumping versions so strategies recompute.

    ``published`` remembers the measured version last copied per operator (updated here).
    """
    for op in target:
        m = measured[op]
        if not m.observations or published.get(op) == m.version:
            continue
        t = target[op]
        t.cost = max(m.cost, 1e-12)
        t.selectivity = m.selectivity
        t.input_tuple_size = m.input_tuple_size
        t.output_tuple_size = m.output_tuple_size
        published[op] = m.version
        t.version += 1
