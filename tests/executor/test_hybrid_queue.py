"""Hybrid queue (fig. 7) and partitioned queue (§4.2): Theorem 4.1 under concurrency.

Prasaad et al. (2018).


The delegation counters are checked by a fixed interleaving (a second worker steps in while the
first is inside ``operate``), which exposes a queue without them on every run; the real-thread
stress test checks the guarantee under many interleavings but can only *find* a broken queue by
chance, so its negative form is a bounded, slow retry loop.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator

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
    """``operate`` that records the order per partition and detects concurrent processing.

    ``during(partition, item)`` runs while the item is being processed (default: a little
    work, so that other threads interleave).
    """

    def __init__(self, during: Callable[[int, int], None] | None = None) -> None:
        self.lock = threading.Lock()
        self.active: set[int] = set()
        self.overlaps = 0
        self.seen: dict[int, list[int]] = {}
        self.during = during

    def __call__(self, partition: int, item: int) -> None:
        with self.lock:
            if partition in self.active:
                self.overlaps += 1
            self.active.add(partition)
        if self.during is None:
            sum(range(random.randrange(50)))
        else:
            self.during(partition, item)
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


def worker_b_steps_in_while_a_operates(queue: HybridQueue[int]) -> tuple[Recorder, int, int]:
    """Two items of partition 0; worker B takes the second entry while A processes the first.

    Worker A dequeues the first master entry and starts ``operate(0, 0)``; inside it, worker B
    runs one ``consume_inputs`` step of its own and dequeues the second entry. The queue keeps
    no per-thread state (``worker`` is ignored), so B's nested call is a second worker at
    exactly this point of the interleaving, with no thread and no timing involved. Returns the
    recorder and the items A and B processed.
    """
    queue.add_input(0, 0)
    queue.add_input(0, 1)
    processed_by_b: list[int] = []

    def b_steps_in(partition: int, item: int) -> None:
        if item == 0:
            processed_by_b.append(queue.consume_inputs(rec, max_entries=1))

    rec = Recorder(during=b_steps_in)
    processed_by_a = queue.consume_inputs(rec, max_entries=1)
    return rec, processed_by_a, processed_by_b[0]


def test_a_worker_meeting_an_active_worker_delegates_its_item() -> None:
    """Fig. 7 L10: B's increment finds count 1, so B leaves item 1 to A, which drains it."""
    queue: HybridQueue[int] = HybridQueue(1)
    rec, by_a, by_b = worker_b_steps_in_while_a_operates(queue)
    assert (by_a, by_b) == (2, 0)
    assert rec.overlaps == 0
    assert rec.seen == {0: [0, 1]}
    assert queue.delegations == 1
    assert queue.idle()


def test_the_interleaving_catches_a_queue_without_delegation_counters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Counters always read as 0: B becomes active too, overlaps A and overtakes item 0."""
    queue: HybridQueue[int] = HybridQueue(1)
    monkeypatch.setattr(queue, "_fetch_add", lambda partition, delta: 0)
    rec, by_a, by_b = worker_b_steps_in_while_a_operates(queue)
    assert (by_a, by_b) == (1, 1)
    assert rec.overlaps == 1
    assert rec.seen == {0: [1, 0]}


def test_theorem_4_1_under_many_threads(fast_switching: None) -> None:
    """8 workers, one producer, skewed partitions: no overlap, exactly once, FIFO per key."""
    queue: HybridQueue[int] = HybridQueue(16)
    rec, expected = run_stress(queue)
    assert rec.overlaps == 0
    assert rec.seen == expected


@pytest.mark.slow
def test_the_stress_test_catches_a_queue_without_delegation_counters(
        fast_switching: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real threads find the broken queue too, given tries: the race needs the OS's help."""
    queue: HybridQueue[int] = HybridQueue(16)
    monkeypatch.setattr(queue, "_fetch_add", lambda partition, delta: 0)

    def exposed() -> bool:
        rec, expected = run_stress(queue, 5_000)
        return rec.overlaps > 0 or rec.seen != expected

    attempt = next((n for n in range(1, 31) if exposed()), None)
    assert attempt is not None, ("30 stress runs on a queue without delegation counters "
                                 "found no overlap and no reordering")
    print(f"\nthe race showed on attempt {attempt}")


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
