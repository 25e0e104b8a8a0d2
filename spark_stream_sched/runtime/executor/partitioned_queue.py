"""The partitioned-queue baseline: one queue per worker, static assignment.

Prasaad et al. (2018), §4.2.


Partition ``p`` always goes to worker ``p % W``; worker ``w`` only ever serves its own queue, so
no concurrency control is needed (each partition has exactly one possible worker), but under key
skew one worker gets most of the work while the others idle, and the reorder buffer downstream
holds back every output behind the busiest worker (fig. 6). This is the in-run baseline the
hybrid queue (:mod:`.hybrid_queue`, fig. 7) is measured against (§7.2.1).

It has the same interface as :class:`~.hybrid_queue.HybridQueue`; ``consume_inputs`` needs the
calling worker's index.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Generic, TypeVar

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.hybrid_queue import Operate

T = TypeVar("T")


class PartitionedQueue(Generic[T]):
    """One FIFO queue per worker; partition ``p`` is served by worker ``p % workers`` (§4.2).

    Parameters
    ----------
    partitions
        Number of key partitions.
    workers
        Number of workers ``W``; worker ``w`` serves the partitions ``p`` with ``p % W == w``.

    Notes
    -----
    Theorem 4.1's two properties hold trivially: a partition has one worker, and a worker's
    queue is FIFO. Thread-safe for one producer and one consumer per worker queue.
    """

    def __init__(self, partitions: int, workers: int) -> None:
        if partitions < 1 or workers < 1:
            raise ConfigError(f"a partitioned queue needs >= 1 partition and worker, got "
                              f"{partitions} partitions and {workers} workers")
        self.partitions, self.workers = partitions, workers
        self._queues: list[deque[tuple[int, T]]] = [deque() for _ in range(workers)]
        self._active = [False] * workers

    def worker_of(self, partition: int) -> int:
        """The one worker that serves ``partition`` (static: ``partition % W``)."""
        return partition % self.workers

    def add_input(self, partition: int, item: T) -> None:
        """Enqueue ``item`` on the queue of the worker that owns ``partition``."""
        if not 0 <= partition < self.partitions:
            raise ConfigError(f"partition {partition} is out of range 0..{self.partitions - 1}")
        self._queues[self.worker_of(partition)].append((partition, item))

    def consume_inputs(self, operate: Operate[T], *, max_entries: int | None = None,
                       deadline: float | None = None, worker: int = 0) -> int:
        """Process items of worker ``worker``'s own queue; return how many were processed.

        ``max_entries`` and ``deadline`` bound the call like
        :meth:`~.hybrid_queue.HybridQueue.consume_inputs` (at least one item when any waits).
        """
        queue = self._queues[worker % self.workers]
        done = 0
        self._active[worker % self.workers] = True
        try:
            while max_entries is None or done < max_entries:
                if deadline is not None and done and time.perf_counter() >= deadline:
                    break
                try:
                    partition, item = queue.popleft()
                except IndexError:
                    break
                operate(partition, item)
                done += 1
        finally:
            self._active[worker % self.workers] = False
        return done

    def __len__(self) -> int:
        """Items waiting in all worker queues."""
        return sum(len(q) for q in self._queues)

    def pending_for(self, worker: int) -> int:
        """Items waiting in worker ``worker``'s own queue."""
        return len(self._queues[worker % self.workers])

    def idle(self) -> bool:
        """True when every queue is empty and no worker is processing."""
        return not len(self) and not any(self._active)
