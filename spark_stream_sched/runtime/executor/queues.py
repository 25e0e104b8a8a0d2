"""Packets and inter-operator queues with size and memory accounting in Arrow bytes.

Every queue of a plan (edge ``source -> target``, Jiang & Chakravarthy (2003), §2) is a
:class:`PacketQueue`. A packet carries a sequence number: the ``k``-th packet of an input stream has
``seq == k`` and every operator turns input packet ``k`` into output packet ``k`` (possibly empty),
so packet order along any queue equals the order of a sequential evaluation. Queues in front of
order-sensitive operators are *ordered*: they hold early packets in a
:class:`~spark_stream_sched.runtime.executor.reorder.ReorderBuffer` (Prasaad et al. 2018, §4, fig.
4, non-blocking: producers never wait) and expose only the contiguous prefix ``next_seq, next_seq +
1, ...``; other queues hand packets out in arrival order, which lets several workers run a stateless
operator at once.

Accounting: ``rows``/``nbytes`` count every buffered packet (Arrow buffer bytes, the real
memory, reorder buffer included); ``ready_work`` counts what a strategy may schedule now;
``backlog`` counts packets pushed and not yet taken (the incremental feeder's read-ahead). An
empty packet still counts as one unit of work (it advances watermarks downstream), so a queue
holding only empty packets is not mistaken for an idle one. Not thread-safe: the engine guards
all queues of a request with one lock.
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field

import pyarrow as pa

from spark_stream_sched.runtime.executor.reorder import ReorderBuffer
from spark_stream_sched.runtime.plan.operators import QueueId


@dataclass(frozen=True)
class Packet:
    """A packet of tuples moving between operators.

    Attributes
    ----------
    seq
        Position of the packet in its queue's sequential order.
    table
        The tuples (an Arrow table, usually a zero-copy slice).
    arrival
        Engine-clock time (seconds) at which the input packet it derives from arrived.
    watermark
        Largest event time of that input packet (``None`` without an event-time column): no later
        packet holds a smaller event time, so it is a ready bound (Gulisano et al. 2016, Def. 1).
    """

    seq: int
    table: pa.Table
    arrival: float
    watermark: int | None = None
    nbytes: int = field(default=-1, compare=False)

    def __post_init__(self) -> None:
        if self.nbytes < 0:
            object.__setattr__(self, "nbytes", arrow_bytes(self.table))

    @property
    def rows(self) -> int:
        """Number of tuples."""
        return int(self.table.num_rows)

    @property
    def work(self) -> int:
        """Scheduling size: tuples, but at least 1 (an empty packet still has to move)."""
        return max(1, self.rows)


def arrow_bytes(table: pa.Table) -> int:
    """Bytes of the values of ``table`` (a slice counts only its rows).

    Fixed-width columns: rows times width (``Table.nbytes`` gives the same up to validity
    bitmaps, but costs tens of microseconds on a slice); otherwise ``Table.nbytes``.
    """
    width = _fixed_width(table.schema)
    return int(table.nbytes) if width is None else width * table.num_rows


@functools.lru_cache(maxsize=256)
def _fixed_width(schema: pa.Schema) -> int | None:
    total = 0
    for f in schema:
        try:
            bits = f.type.bit_width
        except ValueError:
            return None
        if bits < 8:  # booleans are bit-packed: fall back to the exact count
            return None
        total += bits // 8
    return total


class PacketQueue:
    """Queue ``qid`` between two operators; ordered (reorder buffer) or not.

    Parameters
    ----------
    qid
        The plan queue this is.
    ordered
        Expose packets strictly by ``seq`` (for order-sensitive consumers).
    """

    def __init__(self, qid: QueueId, ordered: bool) -> None:
        self.qid = qid
        self.ordered = ordered
        self._ready: deque[Packet] = deque()
        self._reorder: ReorderBuffer[Packet] = ReorderBuffer(f"queue {qid}")
        self.total: int | None = None
        self.pushed = 0
        self.taken = 0
        self.rows = 0
        self.nbytes = 0
        self.ready_work = 0

    def push(self, packet: Packet) -> bool:
        """Add ``packet``; return whether new schedulable work appeared."""
        self.pushed += 1
        self.rows += packet.rows
        self.nbytes += packet.nbytes
        if not self.ordered:
            self._make_ready(packet)
            return True
        released = self._reorder.offer(packet)
        for ready in released:
            self._make_ready(ready)
        return bool(released)

    def _make_ready(self, packet: Packet) -> None:
        self._ready.append(packet)
        self.ready_work += packet.work

    def take(self) -> Packet | None:
        """Remove and return the next ready packet (lowest ``seq`` when ordered)."""
        if not self._ready:
            return None
        packet = self._ready.popleft()
        self.taken += 1
        self.rows -= packet.rows
        self.nbytes -= packet.nbytes
        self.ready_work -= packet.work
        return packet

    def close(self, total: int) -> None:
        """The producer will have pushed exactly ``total`` packets in all."""
        self.total = total

    @property
    def backlog(self) -> int:
        """Packets pushed and not yet taken (ready or held in the reorder buffer)."""
        return self.pushed - self.taken

    @property
    def drained(self) -> bool:
        """Closed, and every packet was taken."""
        return self.total is not None and self.taken == self.total

    @property
    def oldest(self) -> float | None:
        """Arrival time of the next ready packet (``None`` when nothing is ready)."""
        return self._ready[0].arrival if self._ready else None

    @property
    def head_work(self) -> int:
        """Scheduling size of the next ready packet (0 when nothing is ready)."""
        return self._ready[0].work if self._ready else 0

    def __repr__(self) -> str:
        return (f"PacketQueue({self.qid}, ordered={self.ordered}, ready={len(self._ready)}, "
                f"early={len(self._reorder)}, bytes={self.nbytes})")


class QueuesView:
    """A :class:`~spark_stream_sched.runtime.scheduler.state.QueueView` over packet queues.

    Sizes are ready work (tuples, empty packets counting one), times are engine-clock seconds.
    """

    def __init__(self, queues: dict[QueueId, PacketQueue], now: float) -> None:
        self._queues = queues
        self._now = now

    @property
    def now(self) -> float:
        """Return the engine clock at the time of the view."""
        return self._now

    def size(self, queue: QueueId) -> float:
        """Return the schedulable tuples of ``queue``."""
        q = self._queues.get(queue)
        return float(q.ready_work) if q is not None else 0.0

    def oldest(self, queue: QueueId) -> float | None:
        """Return the arrival time of the next ready packet of ``queue``."""
        q = self._queues.get(queue)
        return q.oldest if q is not None else None

    def head_size(self, queue: QueueId) -> float:
        """Return the scheduling size of the next ready packet of ``queue``."""
        q = self._queues.get(queue)
        return float(q.head_work) if q is not None else 0.0
