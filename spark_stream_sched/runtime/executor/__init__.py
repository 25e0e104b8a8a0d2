"""The executor: runs query plans on Arrow packets with worker threads.

* :mod:`.tasks`     -- immediate/deferred tasks, requests, the Bobox task order
  (Falt & Yaghob 2011, §5.1)
* :mod:`.workers`   -- worker threads, stealing, sleeping without lost wake-ups
  (Falt & Yaghob 2011, §5.2)
* :mod:`.queues`    -- packets, inter-operator queues, reorder buffers (Prasaad et al. 2018, §4)
* :mod:`.operators` -- stateless runtime operators; :mod:`.stateful` -- window and keyed ones
* :mod:`.runner`    -- one running plan: strategy decisions, serving units, learned statistics
* :mod:`.sink`      -- ordered output collection
* :mod:`.engine`    -- :class:`Engine`, the entry point
"""

from __future__ import annotations

from spark_stream_sched.runtime.executor.build import build_operator
from spark_stream_sched.runtime.executor.engine import Engine, ExecutionResult, make_strategy
from spark_stream_sched.runtime.executor.operators import RuntimeOperator
from spark_stream_sched.runtime.executor.queues import Packet, PacketQueue
from spark_stream_sched.runtime.executor.tasks import PickRule, Request, Task, TaskKind, TaskQueues
from spark_stream_sched.runtime.executor.workers import WorkerContext, WorkerPool

__all__ = [
    "Engine",
    "ExecutionResult",
    "Packet",
    "PacketQueue",
    "PickRule",
    "Request",
    "RuntimeOperator",
    "Task",
    "TaskKind",
    "TaskQueues",
    "WorkerContext",
    "WorkerPool",
    "build_operator",
    "make_strategy",
]
