"""Seed 002 fig. 7 hybrid queue and §4.2 partitioned queue: Theorem 4.1 under concurrency."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator

import pytest

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.executor.hybrid_queue import HybridQueue
from spark_stream_sched.runtime.executor.partitioned_queue import PartitionedQueue


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every 10 µs so that interleavings are many (restored afterwards)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


class Recorder:
    """``operate`` that records the order per partition and detects concurrent processing."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[int] = set()
        self.overlaps = 0
        self.seen: dict[int, list[int]] = {}

    def __call__(self, partition: int, item: int) -> None:
        with self.lock:
            if partition in self.active:
                self.overlaps += 1
            self.active.add(partition)
        sum(range(random.randrange(50)))  # a little work, so other threads interleave
        with self.lock:
            self.seen.setdefault(partition, []).append(item)
            self.active.discard(partition)


def test_single_worker_processes_each_partition_in_arrival_order() -> None:
    queue: HybridQueue[int] = HybridQueue(3)
    for item, p in enumerate([2, 0, 2, 1, 2, 0]):
        queue.add_input(p, item)
    rec = Recorder()
    assert queue.consume_inputs(rec) == 6
    assert rec.seen == {2: [0, 2, 4], 0: [1, 5], 1: [3]}
    assert queue.idle()
    assert len(queue) == 0


def test_time_slice_limits_master_entries() -> None:
    queue: HybridQueue[int] = HybridQueue(2)
    for item in range(5):
        queue.add_input(item % 2, item)
    assert queue.consume_inputs(Recorder(), max_entries=2) == 2
    assert len(queue) == 3


def run_stress(queue: HybridQueue[int], items: int = 20_000) -> tuple[Recorder,
                                                                       dict[int, list[int]]]:
    """One producer, 8 workers on ``queue``; return the recorder and the expected order."""
    rng = random.Random(7)
    partitions = [min(15, int(abs(rng.gauss(0, 2)))) for _ in range(items)]
    rec = Recorder()
    produced = threading.Event()

    def produce() -> None:
        for item, p in enumerate(partitions):
            queue.add_input(p, item)
        produced.set()

    def consume() -> None:
        while not (produced.is_set() and queue.idle()):
            queue.consume_inputs(rec, max_entries=rng.randrange(1, 40))

    threads = [threading.Thread(target=produce)] + [threading.Thread(target=consume)
                                                    for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected: dict[int, list[int]] = {}
    for item, p in enumerate(partitions):
        expected.setdefault(p, []).append(item)
    return rec, expected


def test_theorem_4_1_under_many_threads(fast_switching: None) -> None:
    """8 workers, one producer, skewed partitions: no overlap, exactly once, FIFO per key."""
    queue: HybridQueue[int] = HybridQueue(16)
    rec, expected = run_stress(queue)
    assert rec.overlaps == 0
    assert rec.seen == expected
    assert queue.delegations > 0  # workers did meet on a busy partition and delegated


def test_the_stress_test_catches_a_queue_without_delegation_counters(
        fast_switching: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every worker 'active' (count always read as 0): overlaps or reordering appear."""
    queue: HybridQueue[int] = HybridQueue(16)
    monkeypatch.setattr(queue, "_fetch_add", lambda partition, delta: 0)
    rec, expected = run_stress(queue, 5_000)
    assert rec.overlaps > 0 or rec.seen != expected


def test_failed_operate_poisons_the_queue() -> None:
    queue: HybridQueue[int] = HybridQueue(1)
    queue.add_input(0, 1)
    queue.add_input(0, 2)

    def boom(partition: int, item: int) -> None:
        raise ValueError(item)

    with pytest.raises(ValueError, match="1"):
        queue.consume_inputs(boom)
    with pytest.raises(StateError, match="failed earlier"):
        queue.consume_inputs(Recorder())


def test_partition_ids_are_checked() -> None:
    with pytest.raises(ConfigError, match="out of range"):
        HybridQueue[int](4).add_input(4, 0)
    with pytest.raises(ConfigError, match="out of range"):
        PartitionedQueue[int](4, 2).add_input(-1, 0)
    with pytest.raises(ConfigError, match=">= 1"):
        HybridQueue[int](0)


def test_partitioned_queue_serves_partition_p_on_worker_p_mod_w() -> None:
    queue: PartitionedQueue[int] = PartitionedQueue(6, 2)
    for item in range(12):
        queue.add_input(item % 6, item)
    assert [queue.pending_for(w) for w in (0, 1)] == [6, 6]
    rec = Recorder()
    assert queue.consume_inputs(rec, worker=1) == 6
    assert sorted(rec.seen) == [1, 3, 5]
    assert rec.seen[1] == [1, 7]
    assert queue.pending_for(0) == 6
    assert not queue.idle()
