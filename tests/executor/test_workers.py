"""Worker threads: every task runs, sleeping threads wake up, no wake-up is lost."""

from __future__ import annotations

import threading

from spark_stream_sched.runtime.executor import PickRule, WorkerContext, WorkerPool

TIMEOUT = 30.0  # a lost wake-up shows as a run that never completes


class Counter:
    def __init__(self, expected: int) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.expected = expected
        self.done = threading.Event()

    def hit(self) -> None:
        with self.lock:
            self.count += 1
            if self.count == self.expected:
                self.done.set()


def test_many_producers_and_consumers_lose_no_wake_up() -> None:
    producers, per_producer, fanout, rounds = 6, 150, 2, 4
    with WorkerPool(3) as pool:
        request = pool.open_request("stress")
        for _ in range(rounds):  # between rounds every worker goes back to sleep
            counter = Counter(producers * per_producer * (1 + fanout))

            def child(ctx: WorkerContext, counter: Counter = counter) -> None:
                counter.hit()

            def parent(ctx: WorkerContext, counter: Counter = counter) -> None:
                for _ in range(fanout):
                    ctx.submit_immediate(request, child)
                counter.hit()

            def produce() -> None:
                for _ in range(per_producer):
                    pool.submit_deferred(request, parent)

            threads = [threading.Thread(target=produce) for _ in range(producers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert counter.done.wait(TIMEOUT), f"only {counter.count} of {counter.expected} ran"
            assert counter.count == counter.expected
        assert sum(pool.picks.values()) == rounds * producers * per_producer * (1 + fanout)
        assert pool.picks[PickRule.OWN_IMMEDIATE] > 0


def test_idle_workers_sleep_and_wake_for_a_single_task() -> None:
    with WorkerPool(3) as pool:
        request = pool.open_request("one")
        for _ in range(20):
            ran = threading.Event()
            pool.submit_deferred(request, lambda ctx, ran=ran: ran.set())
            assert ran.wait(TIMEOUT)
        assert pool.sleeps > 0


def test_a_failing_task_is_reported_and_the_pool_keeps_running() -> None:
    errors: list[BaseException] = []
    with WorkerPool(2, on_error=lambda req, exc: errors.append(exc)) as pool:
        request = pool.open_request("bad")

        def boom(ctx: WorkerContext) -> None:
            raise RuntimeError("boom")

        pool.submit_deferred(request, boom)
        ran = threading.Event()
        pool.submit_deferred(request, lambda ctx: ran.set())
        assert ran.wait(TIMEOUT)
    assert [str(e) for e in errors] == ["boom"]
