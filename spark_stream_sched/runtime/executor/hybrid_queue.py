"""The hybrid queue of Prasaad et al. (2018), §4.3 (fig. 7) and its Theorem 4.1 guarantee.

A master queue of partitions, one FIFO queue per partition and a delegation counter per
partition.

Producers call :meth:`HybridQueue.add_input` (fig. 7 ``addInput``): the item goes to its
partition's queue, then the partition id goes to the master queue. Workers call
:meth:`HybridQueue.consume_inputs` (fig. 7 ``consumeInputs``): a worker dequeues a partition
``p`` from the master queue and increments ``count[p]``. If the counter was 0 the worker becomes
the *active worker* of ``p`` and processes items of ``p`` until its decrement brings the counter
back to 0; otherwise another worker is active on ``p``, so the increment *delegates* one item to
it and the worker moves on to the next master entry without waiting.

Theorem 4.1 (what the tests check, also under many threads):

1. no two workers operate on items of one partition at the same time;
2. every item is processed exactly once, and the items of a partition in arrival order.

Python has no atomic integers; ``fetch_add``/``fetch_sub`` are emulated by a short critical
section on one lock that guards nothing but the counters (it is never held while an item is
processed, so no worker waits for another's work: the paper's progress property). The deques
are CPython's thread-safe ``append``/``popleft``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from spark_stream_sched.errors import ConfigError, StateError

T = TypeVar("T")

#: ``operate(partition, item)``: the operator logic a worker applies to one item.
Operate = Callable[[int, T], None]


class HybridQueue(Generic[T]):
    """Master queue + per-partition queues + delegation counters (Prasaad et al. 2018, fig. 7).

    Parameters
    ----------
    partitions
        Number of partitions ``p`` (the operator's maximum degree of parallelism, §6).

    Notes
    -----
    Any number of producer and worker threads may call the methods concurrently; the paper's
    runtime has one producer (the reorder buffer upstream serialises ``addInput``, §4.3
    "Progress"), which is how :mod:`.keyed_parallel` uses it. If ``operate`` raises, the
    partition's counter stays above 0 and the queue is *failed*: the exception propagates to the
    worker and later calls raise :class:`StateError` (work of the partition would be lost).
    """

    def __init__(self, partitions: int) -> None:
        if partitions < 1:
            raise ConfigError(f"a hybrid queue needs >= 1 partition, got {partitions}")
        self.partitions = partitions
        self._master: deque[int] = deque()
        self._queues: list[deque[T]] = [deque() for _ in range(partitions)]
        self._count = [0] * partitions
        self._count_lock = threading.Lock()
        self._failed: BaseException | None = None
        self.delegations = 0

    # ------------------------------------------------------------------ producers
    def add_input(self, partition: int, item: T) -> None:
        """Fig. 7 ``addInput``: enqueue ``item``, then ``partition`` on the master queue.

        In this order, so a worker that dequeues a master entry always finds its item (L12).
        """
        if not 0 <= partition < self.partitions:
            raise ConfigError(f"partition {partition} is out of range 0..{self.partitions - 1}")
        self._queues[partition].append(item)
        self._master.append(partition)

    # ------------------------------------------------------------------ workers
    def consume_inputs(self, operate: Operate[T], *, max_entries: int | None = None,
                       deadline: float | None = None, worker: int = 0) -> int:
        """Fig. 7 ``consumeInputs``: serve master entries; return the items this call processed.

        Parameters
        ----------
        operate
            Called as ``operate(partition, item)`` for each item this worker processes.
        max_entries, deadline
            The worker's time slice (§6): stop taking master entries after this many, or once
            ``time.perf_counter()`` passed ``deadline``. An active worker always finishes the
            items delegated to it before it returns (L11-14 of fig. 7).
        worker
            Ignored (the hybrid queue has no worker affinity); kept for the common interface
            with :class:`~.partitioned_queue.PartitionedQueue`.
        """
        processed = taken = 0
        while max_entries is None or taken < max_entries:
            if deadline is not None and taken and time.perf_counter() >= deadline:
                break
            try:
                partition = self._master.popleft()
            except IndexError:
                break
            taken += 1
            if self._fetch_add(partition, 1) == 0:  # L10: we are the active worker
                processed += self._drain(partition, operate)
            else:
                self.delegations += 1  # an approximate statistic (not under the lock)
        return processed

    def _drain(self, partition: int, operate: Operate[T]) -> int:
        """L11-14 of fig. 7: process until our decrement brings ``count[p]`` to 0."""
        done = 0
        while True:
            try:
                item = self._queues[partition].popleft()
            except IndexError:  # impossible by fig. 7's ordering in add_input
                raise StateError(f"hybrid queue: partition {partition} has a master entry "
                                 f"but no item (add_input bypassed?)") from None
            try:
                operate(partition, item)
            except BaseException as exc:
                self._failed = exc
                raise
            done += 1
            if self._fetch_add(partition, -1) <= 1:
                return done

    def _fetch_add(self, partition: int, delta: int) -> int:
        """Atomic ``count[p].fetch_add(delta)``: return the value before the addition."""
        if self._failed is not None:
            raise StateError(f"hybrid queue failed earlier: {self._failed!r}")
        with self._count_lock:
            old = self._count[partition]
            self._count[partition] = old + delta
        return old

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        """Master entries not yet dequeued (items waiting for a worker)."""
        return len(self._master)

    def backlog(self, partition: int) -> int:
        """Items of ``partition`` not yet taken by its active worker."""
        return len(self._queues[partition])

    def idle(self) -> bool:
        """True when no item is queued and no worker is active on any partition."""
        with self._count_lock:
            return not self._master and not any(self._count)
