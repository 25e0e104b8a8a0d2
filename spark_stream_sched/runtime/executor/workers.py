"""Worker threads that follow the Bobox task order and sleep without busy waiting.

See Falt & Yaghob (2011), §5.

A :class:`WorkerPool` owns ``n`` threads and one :class:`~.tasks.TaskQueues` (one node: this
machine is an SMP system, which the paper treats as a single NUMA node). A thread that finishes a
task asks the queues for the next one (§5.1 order); when there is none it sleeps on a condition
variable.

No lost wake-ups (§5.2 "Sleeping threads"): the task lists, the count of sleeping threads and
the condition share one lock. A thread checks for work and starts waiting while holding it, and
whoever queues a task does so under the same lock and then notifies a sleeper, so a task queued
"just before" a thread sleeps is either found by its check or wakes it. Hence a thread sleeps
only when no task at all is queued (it would otherwise have found or stolen it), which is the
paper's invariant "a thread must not be suspended when the number of tasks is greater than the
number of running tasks". Python's ``Condition`` replaces the per-thread binary semaphores and
atomic counters the paper uses to avoid system calls.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from types import TracebackType

from spark_stream_sched.runtime.executor.tasks import PickRule, Request, Task, TaskKind, TaskQueues

log = logging.getLogger(__name__)

#: Signature of a task body: it receives the context of the worker running it.
TaskFn = Callable[["WorkerContext"], None]
#: Called with the request and the exception when a task raises.
ErrorHandler = Callable[[Request, BaseException], None]


class WorkerContext:
    """What a running task knows about its worker: its index and how to create tasks."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index

    def submit_immediate(self, request: Request, fn: TaskFn) -> None:
        """Queue an immediate task in this worker's own list (its packet is hot here)."""
        self.pool.submit(request, fn, TaskKind.IMMEDIATE, thread=self.index)

    def submit_deferred(self, request: Request, fn: TaskFn) -> None:
        """Queue a deferred task of ``request``."""
        self.pool.submit(request, fn, TaskKind.DEFERRED)


class WorkerPool:
    """``n_workers`` threads running tasks in the Bobox order.

    Parameters
    ----------
    n_workers
        Number of threads (>= 1).
    on_error
        Called (outside the lock) when a task raises; by default the error is logged. The
        engine uses it to fail the task's request.

    Notes
    -----
    Threads start on construction (or :meth:`start`) and stop at :meth:`shutdown` (also on
    leaving a ``with`` block); queued tasks are dropped at shutdown. ``picks`` counts which rule
    of §5.1 found each task, ``sleeps`` how often a thread went to sleep.
    """

    def __init__(self, n_workers: int, on_error: ErrorHandler | None = None) -> None:
        self.queues = TaskQueues(n_workers)
        self.n_workers = n_workers
        self.on_error = on_error
        self._cond = threading.Condition(threading.Lock())
        self._sleeping = 0
        self._stopping = False
        self.picks: Counter[PickRule] = Counter()
        self.sleeps = 0
        self._threads = [
            threading.Thread(target=self._loop, args=(i,), name=f"bobox-worker-{i}", daemon=True)
            for i in range(n_workers)
        ]
        for t in self._threads:
            t.start()

    # ---------------------------------------------------------------- requests and tasks
    def open_request(self, name: str) -> Request:
        """Register a new request (the newest on this node)."""
        with self._cond:
            return self.queues.add_request(Request(name))

    def close_request(self, request: Request) -> None:
        """Remove a finished request and its queued tasks."""
        with self._cond:
            self.queues.remove_request(request)

    def submit(
        self, request: Request, fn: TaskFn, kind: TaskKind, thread: int | None = None
    ) -> None:
        """Queue a task and wake a sleeping thread if there is one.

        Immediate tasks need the creating ``thread``; from outside the pool use deferred.
        """
        task = Task(request, fn, kind)
        with self._cond:
            if kind is TaskKind.IMMEDIATE and thread is not None:
                self.queues.push_immediate(thread, task)
            else:
                self.queues.push_deferred(task)
            if self._sleeping:
                self._cond.notify()

    def submit_deferred(self, request: Request, fn: TaskFn) -> None:
        """Queue a deferred task of ``request`` (from any thread)."""
        self.submit(request, fn, TaskKind.DEFERRED)

    # ---------------------------------------------------------------- the loop
    def _next(self, index: int) -> Task | None:
        with self._cond:
            while True:
                if self._stopping:
                    return None
                found = self.queues.pop(index)
                if found is not None:
                    self.picks[found[1]] += 1
                    return found[0]
                self._sleeping += 1
                self.sleeps += 1
                self._cond.wait()
                self._sleeping -= 1

    def _loop(self, index: int) -> None:
        context = WorkerContext(self, index)
        while (task := self._next(index)) is not None:
            try:
                task.fn(context)
            except BaseException as exc:  # noqa: BLE001 - reported to the request's owner
                self._report(task.request, exc)

    def _report(self, request: Request, exc: BaseException) -> None:
        if self.on_error is None:
            log.error("task of request %s failed", request.name, exc_info=exc)
        else:
            self.on_error(request, exc)

    # ---------------------------------------------------------------- lifetime
    @property
    def idle(self) -> int:
        """Number of sleeping threads (a snapshot)."""
        with self._cond:
            return self._sleeping

    def shutdown(self) -> None:
        """Stop every thread after its current task; wait for them."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"WorkerPool(n_workers={self.n_workers}, queued={len(self.queues)})"

