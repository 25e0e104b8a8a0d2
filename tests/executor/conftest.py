from __future__ import annotations

from collections.abc import Iterator

import pytest

from spark_stream_sched.runtime.executor import WorkerPool


@pytest.fixture(scope="module")
def pools() -> Iterator[dict[int, WorkerPool]]:
    """One pool per worker count, shared by the runs of a module (threads are reused)."""
    made = {n: WorkerPool(n) for n in (1, 2, 3)}
    yield made
    for pool in made.values():
        pool.shutdown()
