"""Run a query plan on real Arrow data with a scheduling strategy and a pool of workers.

Example::

    engine = Engine(plan, "path_capacity", workers=2)
    result = engine.run({"s1": table})            # or {"s1": [packet, packet, ...]}
    result.outputs["q0_window"]                   # a pa.Table per root operator
    result.metrics.summary()                      # latency, throughput, memory, per operator

Contract: the output of every root is the output of a sequential evaluation (each operator applied
to its whole input stream in order), for every strategy and worker count. Input tables are cut into
packets of half the L2 cache (Falt & Yaghob 2011, §4, :func:`default_packet_rows`) unless
``packet_rows`` is given; a list of tables is taken as the packets themselves. Learned statistics of
one run can seed the next (``Engine(..., stats=result.stats)``).

Incremental input: any other iterable of tables (e.g. a generator reading files) is a stream
*fed while the plan runs* (:mod:`.feed`): packet ``k`` is read only when the stream's input
queues hold fewer than ``read_ahead`` untaken packets, so the strategy, not the reader, decides
what stays queued (Falt & Yaghob 2011, §3.1: each arriving packet creates a task). ``run(...,
read_ahead=n)`` feeds tables and lists that way too; without it they are enqueued at once.
:func:`.stepped.run_stepped` runs the same plan single-threaded on a logical clock (deterministic).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.build import build_operator
from spark_stream_sched.runtime.executor.feed import DEFAULT_READ_AHEAD, feed_incrementally
from spark_stream_sched.runtime.executor.operators import RuntimeOperator
from spark_stream_sched.runtime.executor.queues import Packet
from spark_stream_sched.runtime.executor.runner import PlanRun, publish
from spark_stream_sched.runtime.executor.sink import Sink
from spark_stream_sched.runtime.executor.tasks import PickRule
from spark_stream_sched.runtime.executor.workers import WorkerPool
from spark_stream_sched.runtime.metrics import PlanMetrics
from spark_stream_sched.runtime.packets import default_packet_rows, event_times, row_bytes
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.stats import OperatorStats, StatsTable
from spark_stream_sched.runtime.scheduler.strategies import get_strategy, strategy_options
from spark_stream_sched.runtime.scheduler.strategies.base import Strategy

#: Executor defaults for strategy options (seconds and bytes instead of time/memory units).
DEFAULT_QUANTUM = 0.005
DEFAULT_MEMORY_LIMIT = 8 * 1024 * 1024

#: Stream name -> a table (cut into packets), a list of packets, or any iterable of packets
#: (read while the plan runs).
Inputs = Mapping[str, pa.Table | Sequence[pa.Table] | Iterable[pa.Table]]


@dataclass
class ExecutionResult:
    """What a run produced.

    Attributes
    ----------
    outputs
        Root operator id -> its whole output, in sequential order.
    metrics
        Events and summaries of the run (:mod:`spark_stream_sched.runtime.metrics`).
    stats
        Statistics learned in the run (cost per tuple in seconds, selectivity, bytes/tuple).
    picks
        How often each rule of the Bobox task order (Falt & Yaghob 2011, §5.1) found a task.
    operators
        Operator id -> the runtime operator after the run (e.g. to snapshot a window's state).
    """

    outputs: dict[str, pa.Table]
    metrics: PlanMetrics
    stats: StatsTable
    picks: Counter[PickRule]
    operators: dict[str, RuntimeOperator] = field(default_factory=dict)


def make_strategy(name: str | Strategy, params: Mapping[str, Any] | None = None) -> Strategy:
    """Create a strategy by name with executor defaults (``quantum`` 5 ms, 8 MiB threshold M)."""
    if isinstance(name, Strategy):
        return name
    options = dict(params or {})
    allowed = strategy_options(name)
    options.setdefault("quantum", DEFAULT_QUANTUM)
    if "memory_limit" in allowed:
        options.setdefault("memory_limit", DEFAULT_MEMORY_LIMIT)
    return get_strategy(name, **options)


class Engine:
    """Executes ``plan`` on Arrow packets (see the module docstring).

    Parameters
    ----------
    plan
        Operators of kinds select/filter, project, map, window_aggregate, keyed; one input each.
    strategy
        A strategy name (:func:`~spark_stream_sched.runtime.scheduler.get_strategy`) or object.
    workers
        Worker threads when no ``pool`` is given.
    strategy_params
        Options for a strategy given by name.
    packet_rows
        Rows per packet for input tables (default: half the L2 cache).
    ts_column
        Event-time column; packet watermarks (ready bounds) come from it when present.
    stats
        Initial statistics (e.g. learned by an earlier run); default: the plan's numbers.
    pool
        Run on this pool instead of creating one per run (its threads are reused).
    refresh_every
        Publish the learned statistics to the strategy every this many processed packets
        (each publication makes capacity-based strategies rebuild their units).
    """

    def __init__(self, plan: QueryPlan, strategy: str | Strategy = "fifo", *, workers: int = 1,
                 strategy_params: Mapping[str, Any] | None = None, packet_rows: int | None = None,
                 ts_column: str = "ts", stats: StatsTable | None = None,
                 pool: WorkerPool | None = None, refresh_every: int = 64) -> None:
        for op in plan.operators:
            if len(plan[op].inputs) != 1:
                raise ConfigError(f"operator {op!r} has {len(plan[op].inputs)} inputs; the "
                                  f"executor runs single-input operators (no joins yet)")
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.plan, self.workers, self.pool = plan, workers, pool
        self.strategy_spec, self.strategy_params = strategy, strategy_params
        self.packet_rows, self.ts_column = packet_rows, ts_column
        self.stats, self.refresh_every = stats, refresh_every

    # ------------------------------------------------------------------ preparation
    def build_operators(self, schemas: Mapping[str, pa.Schema]) -> dict[str, RuntimeOperator]:
        """Create runtime operators in topological order, propagating schemas."""
        out: dict[str, pa.Schema] = dict(schemas)
        ops: dict[str, RuntimeOperator] = {}
        for op in self.plan.operators:
            (src,) = self.plan[op].inputs
            if src not in out:
                raise ConfigError(f"no input given for stream {src!r} read by operator {op!r}")
            ops[op] = build_operator(self.plan[op], out[src], self.ts_column)
            out[op] = ops[op].output_schema
        return ops

    def packets(self, data: pa.Table | Iterable[pa.Table]) -> list[pa.Table]:
        """Cut an input table into packets (or take a list of tables as the packets)."""
        if not isinstance(data, pa.Table):
            return list(data)
        rows = self.packet_rows or default_packet_rows(row_bytes(data.schema))
        return [data.slice(i, rows) for i in range(0, max(data.num_rows, 1), rows)]

    def _statistics(self) -> tuple[StatsTable, StatsTable]:
        base = self.stats if self.stats is not None else self.plan.initial_stats()
        strategy_stats = StatsTable({op: _copy(base[op]) for op in self.plan.operators})
        measured = StatsTable({op: OperatorStats() for op in self.plan.operators})
        return strategy_stats, measured

    # ------------------------------------------------------------------ running
    def run(self, inputs: Inputs, *, schedule: Mapping[str, Sequence[float]] | None = None,
            timeout: float | None = None, read_ahead: int | None = None) -> ExecutionResult:
        """Run the plan on ``inputs`` (stream name -> table, packets or iterable of packets).

        ``schedule`` gives, per stream, the arrival time (seconds after the start) of each
        packet; the feeder waits until then (benchmarks). Without it, tables and lists are
        enqueued at once, streams interleaved packet by packet. Iterables that are not
        sequences, and every input when ``read_ahead`` is given, are fed incrementally in the
        calling thread (streams round-robin) with at most ``read_ahead`` (default
        :data:`~.feed.DEFAULT_READ_AHEAD`) untaken packets per stream.

        Raises
        ------
        ConfigError
            Missing inputs, a stream without any packet, bad plan parameters, or ``schedule``
            with incremental input.
        TimeoutError
            The run did not finish within ``timeout`` seconds.
        """
        missing = [s for s in self.plan.streams if s not in inputs]
        if missing:
            raise ConfigError(f"no input given for streams {missing}; got {sorted(inputs)}")
        incremental = read_ahead is not None or any(
            not isinstance(inputs[s], pa.Table | Sequence) for s in self.plan.streams)
        if incremental and schedule is not None:
            raise ConfigError("schedule needs tables or lists of packets, not incremental input")
        sources = {s: self._iterate(inputs[s]) for s in self.plan.streams}
        first = {s: next(it, None) for s, it in sources.items()}
        _check_first(first)
        pool = self.pool or WorkerPool(self.workers)
        start = time.perf_counter()
        run = self.start_run({s: t.schema for s, t in first.items() if t is not None}, pool,
                             lambda: time.perf_counter() - start)
        picks_before = Counter(pool.picks)
        try:
            if incremental:
                feed_incrementally(run, sources, first, read_ahead or DEFAULT_READ_AHEAD,
                                   self.watermark, timeout)
            else:
                packets = {s: [t for t in (first[s], *sources[s]) if t is not None]
                           for s in sources}
                self._feed(run, packets, schedule, start)
            if not run.wait(timeout):
                raise TimeoutError(f"the plan did not finish within {timeout} s")
        finally:
            run.close()
            if self.pool is None:
                pool.shutdown()
        return self.collect(run, picks_before)

    def start_run(self, schemas: Mapping[str, pa.Schema], pool: WorkerPool,
                  clock: Callable[[], float], refresh_every: int | None = None) -> PlanRun:
        """Build operators, strategy and metrics; open a run on ``pool`` (nothing queued yet).

        ``refresh_every`` overrides the engine's publication period of learned statistics.
        """
        operators = self.build_operators(schemas)
        stats, measured = self._statistics()
        strategy = make_strategy(self.strategy_spec, self.strategy_params).bind(self.plan, stats)
        metrics = PlanMetrics(self.plan.operators, strategy=strategy.name, workers=pool.n_workers)
        roots = {op: operators[op].output_schema for op in self.plan.operators
                 if self.plan.is_root(op)}
        return PlanRun(self.plan, strategy, operators, measured, metrics, Sink(roots, metrics),
                       pool, clock, refresh_every or self.refresh_every)

    def collect(self, run: PlanRun, picks_before: Counter[PickRule]) -> ExecutionResult:
        """The result of a finished ``run``; re-raises the run's error if it failed."""
        if run.error is not None:
            raise run.error
        publish(run.measured, run.strategy.stats, {})
        return ExecutionResult(run.sink.tables(), run.metrics, run.measured,
                               Counter(run.pool.picks) - picks_before, dict(run.operators))

    def _iterate(self, data: pa.Table | Sequence[pa.Table] | Iterable[pa.Table],
                 ) -> Iterator[pa.Table]:
        return iter(self.packets(data) if isinstance(data, pa.Table) else data)

    def _feed(self, run: PlanRun, packets: Mapping[str, list[pa.Table]],
              schedule: Mapping[str, Sequence[float]] | None, start: float) -> None:
        events = sorted(
            (schedule[s][k] if schedule is not None else 0.0, k, i, s)
            for i, s in enumerate(packets) for k in range(len(packets[s]))
        )
        for when, k, _, stream in events:
            if run.error is not None:
                return
            delay = when - (time.perf_counter() - start)
            if delay > 0:
                time.sleep(delay)  # pacing arrivals in time, not synchronisation
            table = packets[stream][k]
            run.push_input(stream, Packet(k, table, run.clock(), self.watermark(table)))
        for stream in packets:
            run.close_input(stream)

    def watermark(self, table: pa.Table) -> int | None:
        """Largest event time of an input packet (its ready bound), or None."""
        if self.ts_column not in table.column_names or table.num_rows == 0:
            return None
        return int(event_times(table, self.ts_column, "executor input").max())


def _check_first(first: Mapping[str, pa.Table | None]) -> None:
    empty = [s for s, t in first.items() if t is None]
    if empty:
        raise ConfigError(f"streams {empty} were given no packets; give at least one "
                          f"(possibly empty) table so that the schema is known")


def _copy(s: OperatorStats) -> OperatorStats:
    return OperatorStats(s.cost, s.selectivity, s.input_tuple_size, s.output_tuple_size)
