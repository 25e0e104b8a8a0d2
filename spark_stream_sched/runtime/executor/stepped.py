"""A deterministic single-threaded run of a plan on input arriving in logical ticks.

For tests and models: input comes in ticks (a burst of packets per tick); between ticks the plan
runs on a :class:`StepPool` (the task order of Falt & Yaghob, *Task Scheduling in Data Stream
Processing*, §5.1, without threads) for one tick of service, measured as ``capacity`` cost units
(an operator's cost per tuple times the tuples it processed, from the plan's statistics), on a
logical clock. No wall-clock time enters any decision, so queue sizes, memory and outputs are
the same on every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.engine import Engine, ExecutionResult
from spark_stream_sched.runtime.executor.queues import Packet
from spark_stream_sched.runtime.executor.runner import PlanRun
from spark_stream_sched.runtime.executor.tasks import Request, Task, TaskKind, TaskQueues
from spark_stream_sched.runtime.executor.workers import TaskFn, WorkerContext, WorkerPool

#: Statistics publication period of the step driver: never during the run.
_NEVER = 2**62


class StepPool(WorkerPool):
    """A worker pool without threads: the caller runs queued tasks one by one (:meth:`run_one`).

    Tasks are queued and picked exactly as by :class:`~.workers.WorkerPool` (Falt & Yaghob 2011,
    §5.1 order, one worker with index 0), so a plan run behaves as on a one-thread pool, but
    deterministically and in the caller's thread.
    """

    def __init__(self) -> None:  # deliberately no threads: super().__init__ would start them
        self.queues = TaskQueues(1)
        self.n_workers = 1
        self.on_error = None
        self.picks = Counter()
        self.sleeps = 0
        self._context = WorkerContext(self, 0)

    def open_request(self, name: str) -> Request:
        """Register a new request."""
        return self.queues.add_request(Request(name))

    def close_request(self, request: Request) -> None:
        """Remove a request and its queued tasks."""
        self.queues.remove_request(request)

    def submit(self, request: Request, fn: TaskFn, kind: TaskKind,
               thread: int | None = None) -> None:
        """Queue a task (immediate tasks go to the list of worker ``thread``)."""
        task = Task(request, fn, kind)
        if kind is TaskKind.IMMEDIATE and thread is not None:
            self.queues.push_immediate(thread, task)
        else:
            self.queues.push_deferred(task)

    def run_one(self) -> bool:
        """Run the next task in the §5.1 order; ``False`` when none is queued."""
        found = self.queues.pop(0)
        if found is None:
            return False
        self.picks[found[1]] += 1
        found[0].fn(self._context)
        return True

    @property
    def idle(self) -> int:
        """Number of sleeping threads: none (there are no threads)."""
        return 0

    def shutdown(self) -> None:
        """Nothing to stop."""


class _LogicalClock:
    """Time = service given (cost units / capacity) + idle time; advances as packets run."""

    def __init__(self, cost: Mapping[str, float], capacity: float) -> None:
        self.cost, self.capacity = dict(cost), capacity
        self.idle = 0.0
        self.run: PlanRun | None = None

    def __call__(self) -> float:
        if self.run is None:
            return self.idle
        done = self.run.work_done
        return sum(c * done[op] for op, c in self.cost.items()) / self.capacity + self.idle


def run_stepped(engine: Engine, ticks: Sequence[Mapping[str, Sequence[pa.Table]]],
                capacity: float) -> ExecutionResult:
    """Run ``engine``'s plan deterministically on input arriving in logical ticks.

    Parameters
    ----------
    engine
        Plan, strategy and statistics; its ``workers`` and ``pool`` are not used (one
        logical worker, :class:`StepPool`).
    ticks
        ``ticks[t]`` maps a stream to the packets arriving at tick ``t`` (in stream order).
        Every stream of the plan needs at least one packet somewhere (its schema).
    capacity
        Service per tick in cost units: processing a packet of ``n`` tuples (at least 1) at
        operator ``op`` uses ``n * cost(op)``, with ``cost`` from the engine's initial
        statistics (``Engine(stats=...)`` or the plan's numbers). Service not used in a tick
        (no work) is lost; a decision that overruns its tick delays the next.

    Returns
    -------
    ExecutionResult
        As :meth:`Engine.run`; times (arrival, latency, ``elapsed``) are in ticks. The
        strategy sees the initial statistics throughout (measured seconds on a logical clock
        are meaningless), so every decision depends only on queue contents.

    Raises
    ------
    ConfigError
        ``capacity <= 0`` or a stream without packets.
    """
    if capacity <= 0:
        raise ConfigError(f"capacity must be > 0, got {capacity}")
    schemas = _schemas(engine, ticks)
    base = engine.stats if engine.stats is not None else engine.plan.initial_stats()
    clock = _LogicalClock({op: base[op].cost for op in engine.plan.operators}, capacity)
    pool = StepPool()
    run = engine.start_run(schemas, pool, clock, refresh_every=_NEVER)
    clock.run = run
    seq = dict.fromkeys(engine.plan.streams, 0)
    try:
        for t, arrivals in enumerate(ticks):
            _arrive(engine, run, arrivals, seq, float(t))
            while clock() < t + 1 and run.error is None and pool.run_one():
                pass
            clock.idle += max(0.0, t + 1 - clock())
        for stream in engine.plan.streams:
            run.close_input(stream)
        while run.error is None and pool.run_one():
            pass
    finally:
        run.close()
    if run.error is None and not run.complete.is_set():
        raise RuntimeError("the stepped run stalled with work left (an executor bug)")
    return engine.collect(run, Counter())


def _schemas(engine: Engine, ticks: Sequence[Mapping[str, Sequence[pa.Table]]]
             ) -> dict[str, pa.Schema]:
    """Each stream's schema: its first packet's (ConfigError for a stream without packets)."""
    schemas: dict[str, pa.Schema] = {}
    for tick in ticks:
        for stream, packets in tick.items():
            if packets and stream not in schemas:
                schemas[stream] = packets[0].schema
    missing = [s for s in engine.plan.streams if s not in schemas]
    if missing:
        raise ConfigError(f"streams {missing} were given no packets in any tick")
    return schemas


def _arrive(engine: Engine, run: PlanRun, arrivals: Mapping[str, Sequence[pa.Table]],
            seq: dict[str, int], at: float) -> None:
    """Push one tick's packets, stream by stream, numbered in stream order."""
    for stream in engine.plan.streams:
        for table in arrivals.get(stream, ()):
            run.push_input(stream, Packet(seq[stream], table, at, engine.watermark(table)))
            seq[stream] += 1
