"""Run a chain ``stateless -> keyed -> ...`` on ``W`` real threads, in order.

See Prasaad et al. (2018), §2.2, §5.

Every operator of the chain is an independently schedulable unit with a worklist
(:mod:`.keyed_stages`): a stateless stage has one shared worklist (data parallelism, §4.1); a
keyed stage splits each packet by partition (``assign_to_partition_group(key_hash(keys), P)``,
P = 100 by default) into sub-packets on a :class:`~.hybrid_queue.HybridQueue` (fig. 7) or, as
the baseline, a :class:`~.partitioned_queue.PartitionedQueue` (§4.2); each partition has its own
operator instance. Outputs are released in packet order through fig. 4 reorder buffers, and
within a packet in the order a sequential run emits them (row operators: input order; closing
operators: ``(session_end, session_start, keys)``). By Theorem 5.2 the output stream is the same
for any ``W``, queue kind and heuristic (tested against a sequential run).

Which operator a free worker serves is decided by a Prasaad et al. (2018), §6 heuristic (QST eq 1,
LP, ET eq 2, CT eq 3), the classes of :mod:`~...scheduler.strategies.multicore` bound to a
:class:`~...plan.dag.QueryPlan` of the chain. Units: tuples (rows) and seconds.

The workers start before the first packet is pushed: :meth:`KeyedPipeline.run` feeds packets
from the calling thread as its iterable yields them (a paced source is a generator that sleeps),
and records each packet's latency, from its push to the release of its output by the last stage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.keyed_stages import (
    QUEUES,
    Keyed,
    KeyedStage,
    Packet,
    StageDef,
    Stateless,
    StatelessStage,
)
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind, QueueId
from spark_stream_sched.runtime.plan.stats import OperatorStats, StatsTable
from spark_stream_sched.runtime.scheduler.state import QueueSnapshot
from spark_stream_sched.runtime.scheduler.strategies import get_strategy

HEURISTICS = ("qst", "lp", "et", "ct")
__all__ = ["HEURISTICS", "QUEUES", "Keyed", "KeyedPipeline", "PipelineResult", "Stateless",
           "StageDef"]


# ---------------------------------------------------------------------------- the runner
@dataclass
class PipelineResult:
    """Outputs of a run, in ``seq`` order, and what the scheduler did.

    ``bounds[i]`` is the ready bound ``outputs[i]`` was released under (``None`` for the end of
    the stream, whose output is last). ``latencies`` holds one figure per input packet whose
    output reached the sink: seconds from its push to its release by the last stage.
    """

    outputs: list[pa.Table]
    seconds: float
    cpu_seconds: float
    decisions: dict[str, int]
    bounds: list[int | None] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def table(self) -> pa.Table | None:
        """All outputs concatenated (``None`` when there were none)."""
        return pa.concat_tables(self.outputs) if self.outputs else None


class KeyedPipeline:
    """Run a chain of :class:`Stateless` / :class:`Keyed` stages on ``workers`` threads.

    Parameters
    ----------
    stages
        The chain, upstream first.
    workers
        Number of worker threads ``W`` (>= 1).
    queue
        ``"hybrid"`` (fig. 7) or ``"partitioned"`` (§4.2) for every keyed stage.
    heuristic
        ``"qst"``, ``"lp"``, ``"et"`` or ``"ct"`` (§6): which stage a free worker serves.
    quantum
        The time slice ``s`` of §6 (seconds) a worker stays on its stage.

    Notes
    -----
    A pipeline definition is reusable: every :meth:`run` builds fresh operators and threads.
    """

    def __init__(self, stages: Sequence[StageDef], *, workers: int = 2, queue: str = "hybrid",
                 heuristic: str = "lp", quantum: float = 0.002) -> None:
        if not stages or workers < 1 or queue not in QUEUES or heuristic not in HEURISTICS:
            raise ConfigError(f"KeyedPipeline needs >= 1 stage, workers >= 1, queue in {QUEUES}"
                              f" and heuristic in {HEURISTICS}; got {len(stages)} stages, "
                              f"{workers} workers, {queue!r}, {heuristic!r}")
        self.stages, self.workers, self.queue = list(stages), workers, queue
        self.heuristic, self.quantum = heuristic, quantum
        defs, source = [], "input"
        for spec in self.stages:
            kind = spec.kind if isinstance(spec, Stateless) else OperatorKind.KEYED
            parts = spec.partitions if isinstance(spec, Keyed) else None
            defs.append(OperatorDef(spec.name, kind, (source,), partitions=parts))
            source = spec.name
        self.plan = QueryPlan(defs)

    def run(self, packets: Iterable[tuple[pa.Table, int | None]]) -> PipelineResult:
        """Process ``packets`` (tables in the total order, with their ready bounds) to the end."""
        return _Run(self).execute(packets)


class _Run:
    """One execution: stages, the bound strategy, the sink and the worker threads."""

    def __init__(self, pipeline: KeyedPipeline) -> None:
        self.p = pipeline
        self.cv = threading.Condition()
        self.sleeping = 0
        self.stages: list[StatelessStage | KeyedStage] = [
            StatelessStage(s, self.wake) if isinstance(s, Stateless)
            else KeyedStage(s, pipeline.queue, pipeline.workers, self.wake)
            for s in pipeline.stages]
        for up, down in zip(self.stages, self.stages[1:], strict=False):
            up.downstream = down.push
        self.stages[-1].downstream = self.collect
        self.outputs: list[pa.Table] = []
        self.bounds: list[int | None] = []
        self.pushed: dict[int, float] = {}
        self.latencies: list[float] = []
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.stats = StatsTable({s.name: OperatorStats() for s in pipeline.stages})
        self.strategy = get_strategy(pipeline.heuristic, quantum=pipeline.quantum)
        self.strategy.bind(pipeline.plan, self.stats)
        self.lock = threading.Lock()
        self.decisions = dict.fromkeys(pipeline.plan.operators, 0)

    def wake(self) -> None:
        """New work was queued: wake sleeping workers (they also re-check every 5 ms)."""
        if self.sleeping:
            with self.cv:
                self.cv.notify_all()

    def collect(self, packet: Packet) -> None:
        """Sink: called in ``seq`` order by the last stage's sender."""
        released = time.perf_counter()
        if packet.table is not None:
            self.outputs.append(packet.table)
            self.bounds.append(packet.bound)
        pushed = self.pushed.pop(packet.seq, None)
        if pushed is not None and not packet.end:
            self.latencies.append(released - pushed)
        if packet.end:
            self.done.set()
            self.wake()

    def execute(self, packets: Iterable[tuple[pa.Table, int | None]]) -> PipelineResult:
        start, cpu = time.perf_counter(), time.process_time()
        threads = [threading.Thread(target=self.worker, args=(w,), name=f"keyed-worker-{w}")
                   for w in range(self.p.workers)]
        for t in threads:
            t.start()
        try:
            self.feed(packets)
        except BaseException as exc:
            self.error = self.error or exc
            self.done.set()
            self.wake()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        return PipelineResult(self.outputs, time.perf_counter() - start,
                              time.process_time() - cpu, self.decisions, self.bounds,
                              self.latencies)

    def feed(self, packets: Iterable[tuple[pa.Table, int | None]]) -> None:
        """Push every packet (then the end marker) into the first stage, as they come."""
        n = 0
        for n, (table, bound) in enumerate(packets, start=1):
            if self.done.is_set():  # a worker failed: stop feeding
                return
            self.pushed[n - 1] = time.perf_counter()
            self.stages[0].push(Packet(n - 1, table, bound))
        self.stages[0].push(Packet(n, None, end=True))

    def view(self, worker: int) -> QueueSnapshot:
        sizes = {QueueId(src, op): stage.pending(worker)
                 for stage, (src, op) in zip(self.stages, self.p.plan.queues, strict=True)}
        return QueueSnapshot(time.perf_counter(), sizes)

    def worker(self, w: int) -> None:
        try:
            while not self.done.is_set():
                with self.lock:
                    decision = self.strategy.decide(self.view(w))
                if decision is None:
                    self.sleep()
                    continue
                op = decision.unit.operators[0]
                stage = self.stages[self.p.plan.operators.index(op)]
                t0 = time.perf_counter()
                rows_in, rows_out = stage.work(w, t0 + self.p.quantum)
                elapsed = time.perf_counter() - t0
                with self.lock:
                    self.decisions[op] += 1
                    self.strategy.release(decision, rows_in, elapsed)
                if rows_in:
                    self.stats[op].record(rows_in, rows_out, elapsed)
                else:  # the work was delegated or held by another worker: wait for news
                    self.sleep()
        except BaseException as exc:
            self.error = self.error or exc
            self.done.set()
            self.wake()

    def sleep(self) -> None:
        with self.cv:
            self.sleeping += 1
            self.cv.wait(0.005)
            self.sleeping -= 1
