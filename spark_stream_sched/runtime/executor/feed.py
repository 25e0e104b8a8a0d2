"""Incremental input: packets enter a running plan as they are produced, not all up front.

Seed 000 §3.1: "When a packet is received by the operator, it is switched to state Scheduled
... new task is created" -- input arrives while the plan runs. Queuing a whole batch before
the plan starts leaves every strategy the same peak queue memory (the batch); fed packet by
packet, the input queues grow only as fast as reading outpaces processing, and what stays
queued inside the plan is what the strategy chose not to run (seed 001 §2.2: Chain drains the
operators that release the most memory first, FIFO moves the oldest tuple up its path).

Two drivers:

* :func:`feed_incrementally` -- the engine's threaded mode. The calling thread reads the
  streams round-robin, packet by packet, and pushes each packet while the workers run; before
  reading packet ``k`` of a stream it waits until that stream's input queues hold fewer than
  ``read_ahead`` untaken packets (bounded read-ahead, no busy waiting: every take from an input
  queue signals it).
* :func:`run_stepped` -- a deterministic single-threaded mode for tests and models. Input comes
  in logical ticks (a burst of packets per tick); between ticks the plan runs on a
  :class:`StepPool` (the Bobox task order of seed 000 §5.1, no threads) for one tick of
  service, measured as ``capacity`` cost units (an operator's cost per tuple times the tuples
  it processed, from the plan's statistics), on a logical clock. No wall-clock time enters
  any decision, so queue sizes, memory and outputs are the same on every run.

In both, packet ``k`` of a stream has sequence number ``k``, so outputs equal a sequential
evaluation for every strategy and worker count (:mod:`.queues`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.queues import Packet
from spark_stream_sched.runtime.executor.runner import PlanRun
from spark_stream_sched.runtime.executor.tasks import Request, Task, TaskKind, TaskQueues
from spark_stream_sched.runtime.executor.workers import TaskFn, WorkerContext, WorkerPool

if TYPE_CHECKING:
    from spark_stream_sched.runtime.executor.engine import Engine, ExecutionResult

#: Untaken packets per input stream the threaded feeder reads ahead by default.
DEFAULT_READ_AHEAD = 4
#: Statistics publication period of the step driver: never during the run (see run_stepped).
_NEVER = 2**62

Watermark = Callable[[pa.Table], "int | None"]


def feed_incrementally(run: PlanRun, sources: Mapping[str, Iterator[pa.Table]],
                       first: Mapping[str, pa.Table | None], read_ahead: int,
                       watermark: Watermark, timeout: float | None = None) -> None:
    """Push the packets of ``sources`` into ``run`` as they are read, then close the streams.

    Parameters
    ----------
    run
        An open plan run whose workers are running.
    sources
        Stream name -> its packets, in stream order (read lazily, round-robin over streams).
    first
        Packets already read from ``sources`` (pushed before the rest of their stream).
    read_ahead
        Read a stream's next packet only while its input queues hold fewer than this many
        untaken packets (>= 1).
    watermark
        The packet's ready bound (largest event time), or ``None``.
    timeout
        Seconds to wait for room in all; :class:`TimeoutError` when it runs out.

    Notes
    -----
    An exception (a reader error, the timeout) fails ``run`` before it propagates, so no task
    of the run does more work; the caller closes the run.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = {s: t for s, t in first.items() if t is not None}
    seq = dict.fromkeys(sources, 0)
    live = list(sources)
    try:
        while live and run.error is None:
            for stream in list(live):
                left = None if deadline is None else deadline - time.monotonic()
                if not run.wait_for_room(stream, read_ahead, left):
                    raise TimeoutError(f"the plan did not finish within {timeout} s")
                if run.error is not None:
                    return
                table = pending.pop(stream, None)
                if table is None:
                    table = next(sources[stream], None)
                if table is None:
                    run.close_input(stream)
                    live.remove(stream)
                    continue
                run.push_input(stream, Packet(seq[stream], table, run.clock(), watermark(table)))
                seq[stream] += 1
    except BaseException as exc:
        with run.lock:
            run.fail(exc)
        raise


class StepPool(WorkerPool):
    """A worker pool without threads: the caller runs queued tasks one by one (:meth:`run_one`).

    Tasks are queued and picked exactly as by :class:`~.workers.WorkerPool` (seed 000 §5.1
    order, one worker with index 0), so a plan run behaves as on a one-thread pool, but
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
    schemas: dict[str, pa.Schema] = {}
    for tick in ticks:
        for stream, packets in tick.items():
            if packets and stream not in schemas:
                schemas[stream] = packets[0].schema
    missing = [s for s in engine.plan.streams if s not in schemas]
    if missing:
        raise ConfigError(f"streams {missing} were given no packets in any tick")
    base = engine.stats if engine.stats is not None else engine.plan.initial_stats()
    clock = _LogicalClock({op: base[op].cost for op in engine.plan.operators}, capacity)
    pool = StepPool()
    run = engine.start_run(schemas, pool, clock, refresh_every=_NEVER)
    clock.run = run
    seq = dict.fromkeys(engine.plan.streams, 0)
    try:
        for t, arrivals in enumerate(ticks):
            for stream in engine.plan.streams:
                for table in arrivals.get(stream, ()):
                    run.push_input(stream, Packet(seq[stream], table, float(t),
                                                  engine.watermark(table)))
                    seq[stream] += 1
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
