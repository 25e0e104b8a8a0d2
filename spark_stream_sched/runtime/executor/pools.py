"""Worker pools kept for the life of the process: one set of threads, not one per micro-batch.

A Spark executor's Python worker runs many micro-batches; starting ``n`` worker threads (seed
000 §5) for each of them is pure overhead. :func:`borrowed_pool` lends an idle
:class:`~.workers.WorkerPool` of the requested size, creating one only when none is idle (so two
batches running at once in one process never share a pool), and takes it back afterwards. All
pools are shut down when the process exits.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from spark_stream_sched.runtime.executor.workers import WorkerPool

_lock = threading.Lock()
#: worker count -> pools of that size not lent out now
_idle: dict[int, list[WorkerPool]] = {}


@contextmanager
def borrowed_pool(n_workers: int) -> Iterator[WorkerPool]:
    """Lend an idle pool of ``n_workers`` threads (a new one if none is idle) for a block."""
    with _lock:
        idle = _idle.setdefault(n_workers, [])
        pool = idle.pop() if idle else None
    if pool is None:
        pool = WorkerPool(n_workers)
    try:
        yield pool
    finally:
        with _lock:
            _idle.setdefault(n_workers, []).append(pool)


def idle_pools() -> int:
    """Number of pools kept for reuse (for tests and metrics)."""
    with _lock:
        return sum(len(pools) for pools in _idle.values())


@atexit.register
def shutdown_pools() -> None:
    """Stop every kept pool's threads (registered to run at process exit)."""
    with _lock:
        pools = [pool for idle in _idle.values() for pool in idle]
        _idle.clear()
    for pool in pools:
        pool.shutdown()
