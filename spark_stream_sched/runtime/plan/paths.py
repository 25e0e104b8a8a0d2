"""Operator paths: from a leaf operator up to a root, excluding source and root.

See Jiang & Chakravarthy (2003), §2.

Each path starts at the queue from an input stream into a leaf operator. When an operator's
output feeds several operators the plan branches and every branch is its own path; a join lies
on one path per input.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import QueueId


@dataclass(frozen=True)
class OperatorPath:
    """One operator path.

    Attributes
    ----------
    stream
        The input stream the path starts from.
    operators
        Operator ids from the leaf node to the root, bottom-up.
    """

    stream: str
    operators: tuple[str, ...]

    @property
    def input_queue(self) -> QueueId:
        """The path's input queue: stream -> leaf operator."""
        return QueueId(self.stream, self.operators[0])

    @property
    def queues(self) -> tuple[QueueId, ...]:
        """The input queue followed by the queues between consecutive operators."""
        inner = (QueueId(a, b) for a, b in zip(self.operators, self.operators[1:], strict=False))
        return (self.input_queue, *inner)

    def __str__(self) -> str:
        return f"{self.stream}:" + ">".join(self.operators)


def operator_paths(plan: QueryPlan) -> tuple[OperatorPath, ...]:
    """Every operator path of ``plan`` in a deterministic order (streams, then branches).

    Notes
    -----
    The number of paths can grow exponentially with the number of branch points; plans of
    continuous queries are small, so paths are enumerated explicitly.
    """
    paths: list[OperatorPath] = []
    for stream in plan.streams:
        for leaf in plan.consumers(stream):
            for ops in _upward(plan, (leaf,)):
                paths.append(OperatorPath(stream, ops))
    return tuple(paths)


def _upward(plan: QueryPlan, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    consumers = plan.consumers(prefix[-1])
    if not consumers:
        return [prefix]
    out: list[tuple[str, ...]] = []
    for c in consumers:
        out.extend(_upward(plan, (*prefix, c)))
    return out
