"""The stages a :class:`~.keyed_parallel.KeyedPipeline` runs.

See Prasaad et al. (2018), §2.2, §4, fig. 4, fig. 7.

* :class:`Stateless` / :class:`Keyed` are the user-facing stage definitions;
* :class:`StatelessStage` serves one shared worklist (data parallelism, §4.1);
* :class:`KeyedStage` splits each packet by partition into sub-packets on a hybrid (fig. 7) or
  partitioned (§4.2) queue; partition ``p`` has its own operator instance ``factory(p)``.

Both send their outputs through a fig. 4 reorder buffer with the non-blocking try-flag (a
worker never waits for another to send downstream). A keyed packet's output is its partitions'
outputs put back in the order a sequential run of the operator emits:

* row operators (``emits_rows``): a stable sort on the packet positions of the producing tuples;
* closing operators (e.g. ``sessionize``): a sort by ``(session_end, session_start, keys)``
  with nulls first, the order :meth:`~...keyed.pipeline.Pipeline.in_order` defines (an operator
  without session columns: by its key columns), so the output equals a sequential run too.

Units: tuples (rows); the end-of-stream marker counts as one tuple so that it is schedulable.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.hybrid_queue import HybridQueue
from spark_stream_sched.runtime.executor.partitioned_queue import PartitionedQueue
from spark_stream_sched.runtime.executor.reorder import ReorderBuffer
from spark_stream_sched.runtime.keyed.base import KeyedOperator
from spark_stream_sched.runtime.keyed.pipeline import SESSION_END, SESSION_START
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.plan.operators import OperatorKind

QUEUES = ("hybrid", "partitioned")


@dataclass(frozen=True)
class Packet:
    """One unit of the ordered stream; ``end`` marks the last one (``table`` may be ``None``).

    The end packet of a keyed stage carries what its operators' ``finish`` returned.
    """

    seq: int
    table: pa.Table | None
    bound: int | None = None
    end: bool = False


@dataclass(frozen=True)
class Stateless:
    """Definition of a stateless stage: ``fn`` maps a packet's table to its output table."""

    name: str
    fn: Callable[[pa.Table], pa.Table]
    kind: OperatorKind = OperatorKind.FILTER


@dataclass(frozen=True)
class Keyed:
    """Definition of a keyed stage (a partitioned stateful operator, Prasaad et al. (2018), §2.1).

    ``factory(p)`` builds partition ``p``'s operator; ``partition_of(table)`` may replace the
    default hash partitioning (e.g. range partitioning as in §7.2.1).
    """

    name: str
    factory: Callable[[int], KeyedOperator]
    key_columns: tuple[str, ...]
    partitions: int = 100
    partition_of: Callable[[pa.Table], np.ndarray] | None = None


StageDef = Stateless | Keyed


# ---------------------------------------------------------------------------- stages
class Stage:
    """Common output side: fig. 4 reorder buffer + try-flag, then ``downstream``."""

    def __init__(self, name: str, wake: Callable[[], None]) -> None:
        self.name, self.wake = name, wake
        self.downstream: Callable[[Packet], None] = lambda packet: None
        self._reorder: ReorderBuffer[Packet] = ReorderBuffer(name)
        self._buffer_lock = threading.Lock()
        self._ready: deque[Packet] = deque()
        self._flag = threading.Lock()
        self._pending = [0]
        self._pending_lock = threading.Lock()

    def pending(self, worker: int) -> int:
        """Tuples (end markers count 1) waiting that ``worker`` may process."""
        return self._pending[0]

    def _count(self, delta: int, slot: int = 0) -> None:
        with self._pending_lock:
            self._pending[slot] += delta

    def send(self, packet: Packet) -> None:
        """Fig. 4 ``send``: add to the buffer; whoever sets the flag sends what is ready."""
        with self._buffer_lock:
            self._ready.extend(self._reorder.offer(packet))
        while self._ready and self._flag.acquire(blocking=False):
            try:
                while self._ready:
                    self.downstream(self._ready.popleft())
            finally:
                self._flag.release()  # then re-check (fig. 4 L40-42): the while condition


class StatelessStage(Stage):
    """A stateless stage: one shared worklist, any worker takes any packet (§4.1)."""

    def __init__(self, spec: Stateless, wake: Callable[[], None]) -> None:
        super().__init__(spec.name, wake)
        self.fn = spec.fn
        self._worklist: deque[Packet] = deque()

    def push(self, packet: Packet) -> None:
        """Queue a packet (called by the single upstream sender)."""
        self._count(_size(packet.table, packet.end))
        self._worklist.append(packet)
        self.wake()

    def work(self, worker: int, deadline: float) -> tuple[int, int]:
        """Process packets until ``deadline``; return (tuples in, rows out)."""
        rows_in = rows_out = 0
        while not rows_in or time.perf_counter() < deadline:
            try:
                packet = self._worklist.popleft()
            except IndexError:
                break
            self._count(-_size(packet.table, packet.end))  # taken: no longer offered
            out = None if packet.table is None else self.fn(packet.table)
            rows_in, rows_out = rows_in + _size(packet.table, packet.end), rows_out + _size(out)
            self.send(Packet(packet.seq, out, packet.bound, packet.end))
        return rows_in, rows_out


@dataclass
class _Sub:
    """A sub-packet: the rows of one partition and their positions; ``final``: then finish."""

    seq: int
    rows: pa.Table | None
    positions: np.ndarray
    bound: int | None
    final: bool = False


@dataclass
class _Slot:
    """The partition outputs of one packet collected so far."""

    remaining: int
    bound: int | None
    end: bool
    parts: dict[int, tuple[pa.Table, np.ndarray | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class KeyedStage(Stage):
    """A keyed stage: per-partition operators behind a hybrid or partitioned queue (§4)."""

    def __init__(self, spec: Keyed, queue: str, workers: int, wake: Callable[[], None]) -> None:
        super().__init__(spec.name, wake)
        self.spec = spec
        self.ops = [spec.factory(p) for p in range(spec.partitions)]
        self.emits_rows = self.ops[0].emits_rows
        self.closing_order = [] if self.emits_rows else closing_order(
            self.ops[0].output_schema, spec.key_columns)
        self.queue: HybridQueue[_Sub] | PartitionedQueue[_Sub] = (
            HybridQueue(spec.partitions) if queue == "hybrid"
            else PartitionedQueue(spec.partitions, workers))
        self._pending = [0] * (workers if queue == "partitioned" else 1)
        self._slots: dict[int, _Slot] = {}

    def pending(self, worker: int) -> int:
        """Tuples waiting that ``worker`` may process (its own queue when partitioned)."""
        if isinstance(self.queue, PartitionedQueue):
            return self._pending[self.queue.worker_of(worker)]
        return self._pending[0]

    def _slot_of(self, partition: int) -> int:
        return self.queue.worker_of(partition) if isinstance(self.queue, PartitionedQueue) else 0

    def push(self, packet: Packet) -> None:
        """Fig. 7 ``addInput`` for each sub-packet (called by the single upstream sender)."""
        subs = self._split(packet)
        if not subs:
            empty = self.ops[0].output_schema.empty_table()
            self.send(Packet(packet.seq, empty, packet.bound, packet.end))
            return
        self._slots[packet.seq] = _Slot(len(subs), packet.bound, packet.end)
        for p, sub in subs:
            self._count(_size(sub.rows, sub.final), self._slot_of(p))
            self.queue.add_input(p, sub)
        self.wake()

    def _split(self, packet: Packet) -> list[tuple[int, _Sub]]:
        seq, table, bound, end = packet.seq, packet.table, packet.bound, packet.end
        if table is None:
            table = self.ops[0].input_schema.empty_table()
        parts = self._partitions(table)
        order = np.argsort(parts, kind="stable")
        counts = np.bincount(parts, minlength=self.spec.partitions)
        sorted_table, starts = table.take(order), np.concatenate([[0], np.cumsum(counts)])
        # a closing operator may close groups on the bound alone; at the end all finish
        every = end or not self.emits_rows
        return [(p, _Sub(seq, sorted_table.slice(starts[p], counts[p]),
                         order[starts[p]:starts[p + 1]], bound, end))
                for p in range(self.spec.partitions) if counts[p] or every]

    def _partitions(self, table: pa.Table) -> np.ndarray:
        if self.spec.partition_of is not None:
            parts = np.asarray(self.spec.partition_of(table), dtype=np.int64)
            if len(parts) and (parts.min() < 0 or parts.max() >= self.spec.partitions):
                raise ConfigError(f"{self.name}: partition_of returned ids outside "
                                  f"0..{self.spec.partitions - 1}")
            return parts
        hashes = key_hash(table, list(self.spec.key_columns))
        return assign_to_partition_group(hashes, self.spec.partitions).astype(np.int64)

    def work(self, worker: int, deadline: float) -> tuple[int, int]:
        """Serve the queue (fig. 7 ``consumeInputs``) until ``deadline``; (tuples in, out)."""
        totals = [0, 0]

        def operate(partition: int, sub: _Sub) -> None:
            self._count(-_size(sub.rows, sub.final), self._slot_of(partition))
            op = self.ops[partition]
            out = op.update(sub.rows, sub.bound) if sub.rows is not None else None
            if sub.final:
                done = op.finish()
                out = done if out is None else pa.concat_tables([out, done])
            assert out is not None
            totals[0] += _size(sub.rows, sub.final)
            totals[1] += out.num_rows
            self._deliver(partition, sub, out)

        self.queue.consume_inputs(operate, deadline=deadline, worker=worker)
        return totals[0], totals[1]

    def _deliver(self, partition: int, sub: _Sub, out: pa.Table) -> None:
        positions = _positions(out, sub) if self.emits_rows else None
        slot = self._slots[sub.seq]
        with slot.lock:
            slot.parts[partition] = (out, positions)
            slot.remaining -= 1
            complete = slot.remaining == 0
        if complete:
            del self._slots[sub.seq]
            table = _assemble(slot, self.ops[0].output_schema, self.closing_order)
            self.send(Packet(sub.seq, table, slot.bound, slot.end))


def _size(table: pa.Table | None, end: bool = False) -> int:
    """Tuples a packet counts for in worklist sizes (the end marker counts 1 more)."""
    return (0 if table is None else table.num_rows) + end


def _identity(table: pa.Table) -> np.ndarray:
    inputs = table.column(INPUT_COL).to_numpy().astype(np.int64)
    return np.asarray((inputs << 40) | table.column(SEQ_COL).to_numpy().astype(np.int64))


def _positions(out: pa.Table, sub: _Sub) -> np.ndarray:
    """Packet positions of the tuples that produced ``out``'s rows (row operators).

    Rows whose tuple is not in ``sub`` (what ``finish`` returned) go after every tuple.
    """
    rows = sub.rows if sub.rows is not None else out.schema.empty_table()
    if out.num_rows == rows.num_rows:  # one row per tuple, in input order (the contract)
        return sub.positions
    ids = _identity(rows)
    order = np.argsort(ids, kind="stable")
    found = np.searchsorted(ids[order], _identity(out))
    hit = found < len(ids)
    hit[hit] = ids[order[found[hit]]] == _identity(out)[hit]
    last = np.iinfo(np.int64).max
    return np.where(hit, sub.positions[order[np.minimum(found, len(ids) - 1)]] if len(ids)
                    else last, last)


def closing_order(schema: pa.Schema, key_columns: tuple[str, ...]) -> list[str]:
    """Sort columns of a closing operator's output: ``(session_end, session_start, keys)``.

    The order of :meth:`~...keyed.pipeline.Pipeline.order_columns` for sessions; an operator
    without session columns is ordered by its key columns (those present in ``schema``).
    """
    names = [SESSION_END, SESSION_START] if {SESSION_END, SESSION_START} <= set(schema.names) \
        else []
    return names + [k for k in key_columns if k in schema.names]


def _assemble(slot: _Slot, schema: pa.Schema, order_by: list[str]) -> pa.Table:
    """Concatenate partition outputs in the order a sequential run emits them.

    Row outputs are stably re-sorted into input order; a closing operator's output is sorted by
    ``order_by`` with nulls first (``Pipeline.in_order``).
    """
    parts = [slot.parts[p] for p in sorted(slot.parts)]
    tables = [t for t, _ in parts if t.num_rows]
    if not tables:
        return schema.empty_table()
    table = pa.concat_tables(tables)
    positions = [pos for t, pos in parts if t.num_rows]
    if all(pos is not None for pos in positions):
        order = np.argsort(np.concatenate(positions), kind="stable")  # type: ignore[arg-type]
        return table.take(order)
    if order_by and len(tables) > 1:
        keys = [(name, "ascending", "at_start") for name in order_by]
        table = table.take(pc.sort_indices(table, sort_keys=keys))
    return table
