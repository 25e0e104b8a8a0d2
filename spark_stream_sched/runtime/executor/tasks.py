"""Tasks, requests and the Bobox task order (Falt & Yaghob 2011, §3.1, §5.1), without any threads.

A *request* is one running query plan (Falt & Yaghob 2011, §3: "we denote execution plans as
requests"). A task belongs to one request and is either

* **immediate** -- created by a worker for a packet it has just produced, so the packet is
  probably hot in that worker's cache; it goes to the list of the thread that created it;
* **deferred** -- not tied to a hot packet (external arrivals, re-scheduling); it goes to the
  list of its request.

:class:`TaskQueues` holds these lists for one node (an SMP machine is one NUMA node) and
implements the order in which a worker looks for its next task (§5.1):

1. the newest task in the worker's own immediate list;
2. the oldest deferred task of the request the worker evaluated last;
3. the oldest deferred task of the oldest request that has one;
4. the oldest immediate task of another worker (stealing);
5. nothing: the caller puts the worker to sleep (:mod:`.workers`).

Reading of step 3: the paper's "oldest existing task of the oldest request" is taken among
deferred tasks, since immediate tasks of other threads are what step 4 steals. The class is
pure data-structure logic (not thread-safe): :class:`~.workers.WorkerPool` calls it under its
lock, and unit tests drive it step by step in one thread.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spark_stream_sched.errors import ConfigError


class TaskKind(enum.Enum):
    """Immediate (bound to a hot packet) or deferred (Falt & Yaghob 2011, §3.1)."""

    IMMEDIATE = "immediate"
    DEFERRED = "deferred"


class PickRule(enum.Enum):
    """Which step of the §5.1 order found a task."""

    OWN_IMMEDIATE = 1
    SAME_REQUEST = 2
    OLDEST_REQUEST = 3
    STEAL = 4


@dataclass(eq=False)
class Request:
    """A request (one running plan): its deferred tasks and its age.

    Attributes
    ----------
    name
        Label for logs and tests.
    order
        Creation rank on its node (lower is older); set by :meth:`TaskQueues.add_request`.
    """

    name: str
    order: int = -1
    deferred: deque[Task] = field(default_factory=deque)


@dataclass(eq=False)
class Task:
    """One unit of work: ``fn(context)`` run by some worker.

    Attributes
    ----------
    request
        The request the task belongs to.
    fn
        Called with the worker context (see :class:`~.workers.WorkerContext`).
    kind
        Immediate or deferred.
    order
        Creation rank (global, increasing); set when the task is queued.
    """

    request: Request
    fn: Callable[[Any], None]
    kind: TaskKind
    order: int = -1


class TaskQueues:
    """The task lists of one node and the §5.1 selection order.

    Parameters
    ----------
    n_threads
        Number of worker threads (thread indices ``0 .. n_threads - 1``).

    Notes
    -----
    Not thread-safe; callers serialise access. ``len(queues)`` is the number of queued tasks.
    """

    def __init__(self, n_threads: int) -> None:
        if n_threads < 1:
            raise ConfigError(f"need at least one worker thread, got {n_threads}")
        self.immediate: list[deque[Task]] = [deque() for _ in range(n_threads)]
        self.requests: list[Request] = []
        self.last_request: list[Request | None] = [None] * n_threads
        self._task_counter = itertools.count()
        self._request_counter = itertools.count()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    # ---------------------------------------------------------------- creation
    def add_request(self, request: Request) -> Request:
        """Register ``request`` as the newest request of the node."""
        request.order = next(self._request_counter)
        self.requests.append(request)
        return request

    def remove_request(self, request: Request) -> None:
        """Forget ``request`` and drop its queued tasks (it finished or failed)."""
        if request in self.requests:
            self.requests.remove(request)
        self._size -= len(request.deferred)
        request.deferred.clear()
        for lst in self.immediate:
            kept = [t for t in lst if t.request is not request]
            self._size -= len(lst) - len(kept)
            lst.clear()
            lst.extend(kept)
        self.last_request = [None if r is request else r for r in self.last_request]

    def push_immediate(self, thread: int, task: Task) -> None:
        """Queue an immediate task in the list of the thread that created it."""
        task.kind, task.order = TaskKind.IMMEDIATE, next(self._task_counter)
        self.immediate[thread].append(task)
        self._size += 1

    def push_deferred(self, task: Task) -> None:
        """Queue a deferred task in the list of its request."""
        task.kind, task.order = TaskKind.DEFERRED, next(self._task_counter)
        task.request.deferred.append(task)
        self._size += 1

    # ---------------------------------------------------------------- selection
    def pop(self, thread: int) -> tuple[Task, PickRule] | None:
        """Remove and return the next task for ``thread`` by the §5.1 order, or ``None``."""
        found = self._find(thread)
        if found is not None:
            self._size -= 1
            self.last_request[thread] = found[0].request
        return found

    def _find(self, thread: int) -> tuple[Task, PickRule] | None:
        own = self.immediate[thread]
        if own:
            return own.pop(), PickRule.OWN_IMMEDIATE
        last = self.last_request[thread]
        if last is not None and last.deferred:
            return last.deferred.popleft(), PickRule.SAME_REQUEST
        for request in self.requests:  # oldest request first
            if request.deferred:
                return request.deferred.popleft(), PickRule.OLDEST_REQUEST
        return self._steal(thread)

    def _steal(self, thread: int) -> tuple[Task, PickRule] | None:
        victims = [lst for i, lst in enumerate(self.immediate) if i != thread and lst]
        if not victims:
            return None
        victim = min(victims, key=lambda lst: lst[0].order)
        return victim.popleft(), PickRule.STEAL
