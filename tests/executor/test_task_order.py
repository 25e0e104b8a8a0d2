"""The Bobox task order (Falt & Yaghob 2011, §5.1), driven step by step in one thread."""

from __future__ import annotations

import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor import PickRule, Request, Task, TaskKind, TaskQueues


def task(request: Request, label: str) -> Task:
    t = Task(request, lambda ctx: None, TaskKind.DEFERRED)
    t.label = label  # type: ignore[attr-defined]
    return t


def labels(queues: TaskQueues, thread: int, n: int) -> list[tuple[str, PickRule]]:
    out = []
    for _ in range(n):
        found = queues.pop(thread)
        assert found is not None
        out.append((found[0].label, found[1]))  # type: ignore[attr-defined]
    return out


def test_newest_immediate_task_of_this_thread_first() -> None:
    q = TaskQueues(2)
    r = q.add_request(Request("r"))
    q.push_deferred(task(r, "d1"))
    for name in ("i1", "i2", "i3"):
        q.push_immediate(0, task(r, name))
    assert labels(q, 0, 4) == [("i3", PickRule.OWN_IMMEDIATE), ("i2", PickRule.OWN_IMMEDIATE),
                               ("i1", PickRule.OWN_IMMEDIATE), ("d1", PickRule.SAME_REQUEST)]
    assert q.pop(0) is None
    assert len(q) == 0


def test_oldest_deferred_task_of_the_last_request_before_older_requests() -> None:
    q = TaskQueues(1)
    old = q.add_request(Request("old"))
    new = q.add_request(Request("new"))
    q.push_deferred(task(new, "n1"))
    q.push_deferred(task(old, "o1"))
    q.push_deferred(task(new, "n2"))
    q.push_deferred(task(old, "o2"))
    # No last request yet: the oldest request goes first, then the thread sticks to it.
    assert labels(q, 0, 2) == [("o1", PickRule.OLDEST_REQUEST), ("o2", PickRule.SAME_REQUEST)]
    # "old" is empty now: the oldest request with a task, then stick to it, oldest first.
    assert labels(q, 0, 2) == [("n1", PickRule.OLDEST_REQUEST), ("n2", PickRule.SAME_REQUEST)]


def test_same_request_preferred_over_an_older_request() -> None:
    q = TaskQueues(1)
    old = q.add_request(Request("old"))
    new = q.add_request(Request("new"))
    q.push_immediate(0, task(new, "i"))
    q.push_deferred(task(old, "o1"))
    q.push_deferred(task(new, "n1"))
    assert labels(q, 0, 3) == [("i", PickRule.OWN_IMMEDIATE), ("n1", PickRule.SAME_REQUEST),
                               ("o1", PickRule.OLDEST_REQUEST)]


def test_steal_oldest_immediate_task_of_another_thread_last() -> None:
    q = TaskQueues(3)
    r = q.add_request(Request("r"))
    q.push_immediate(1, task(r, "a1"))
    q.push_immediate(2, task(r, "b1"))
    q.push_immediate(1, task(r, "a2"))
    assert labels(q, 0, 3) == [("a1", PickRule.STEAL), ("b1", PickRule.STEAL),
                               ("a2", PickRule.STEAL)]
    q.push_immediate(1, task(r, "a3"))
    q.push_deferred(task(r, "d"))
    assert labels(q, 0, 1) == [("d", PickRule.SAME_REQUEST)]  # deferred before stealing
    assert labels(q, 1, 1) == [("a3", PickRule.OWN_IMMEDIATE)]
    assert q.pop(2) is None


def test_removing_a_request_drops_its_tasks() -> None:
    q = TaskQueues(2)
    a, b = q.add_request(Request("a")), q.add_request(Request("b"))
    q.push_immediate(0, task(a, "a-i"))
    q.push_deferred(task(a, "a-d"))
    q.push_deferred(task(b, "b-d"))
    assert len(q) == 3
    q.remove_request(a)
    assert len(q) == 1
    assert labels(q, 0, 1) == [("b-d", PickRule.OLDEST_REQUEST)]
    assert q.requests == [b]


def test_needs_a_thread() -> None:
    with pytest.raises(ConfigError, match="at least one worker"):
        TaskQueues(0)
