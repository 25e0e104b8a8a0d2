"""The query plan: a validated DAG of operator definitions joined by queues.

See Jiang & Chakravarthy (2003), §2.

Input streams are the source nodes; operators whose output no scheduled operator consumes are
the roots (their output leaves the system, i.e. goes to the root node / application, which
consumes it immediately: §2.1 assumption 1). Operators of kind ``sink`` stand for that root
node: they are part of the definition but are never scheduled, and queues into them are not
counted. Building a plan runs nothing.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping
from functools import cached_property

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind, QueueId
from spark_stream_sched.runtime.plan.stats import StatsTable


class QueryPlan:
    """A DAG of operator definitions; the unit a strategy schedules over.

    Parameters
    ----------
    operators
        Operator definitions; inputs that are not operator ids are input stream names.

    Raises
    ------
    ConfigError
        Duplicate ids, an operator reading a sink, or a cycle.

    Notes
    -----
    Immutable after construction. ``operators`` lists the scheduled (non-sink) operators in a
    deterministic topological order (leaves first, ties by definition order).
    """

    def __init__(self, operators: Iterable[OperatorDef]) -> None:
        defs = list(operators)
        self._defs: dict[str, OperatorDef] = {}
        for d in defs:
            if d.op_id in self._defs:
                raise ConfigError(f"operator id {d.op_id!r} is defined twice")
            self._defs[d.op_id] = d
        if not any(d.kind is not OperatorKind.SINK for d in defs):
            raise ConfigError("a plan needs at least one operator that is not a sink")
        self._check_sink_inputs()
        self._order = self._topological_order(defs)

    def _check_sink_inputs(self) -> None:
        for d in self._defs.values():
            for src in d.inputs:
                if src in self._defs and self._defs[src].kind is OperatorKind.SINK:
                    raise ConfigError(
                        f"operator {d.op_id!r} reads sink {src!r}; sinks emit nothing"
                    )

    def _topological_order(self, defs: list[OperatorDef]) -> tuple[str, ...]:
        position = {d.op_id: i for i, d in enumerate(defs)}
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for d in defs:
            sorter.add(d.op_id, *(s for s in d.inputs if s in self._defs))
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            raise ConfigError(f"the plan has a cycle through operators {exc.args[1]}") from exc
        order: list[str] = []
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=position.__getitem__)
            order.extend(ready)
            sorter.done(*ready)
        return tuple(o for o in order if self._defs[o].kind is not OperatorKind.SINK)

    # ---------------------------------------------------------------- structure
    @property
    def operators(self) -> tuple[str, ...]:
        """Scheduled operator ids in topological order (leaves first)."""
        return self._order

    def __getitem__(self, op_id: str) -> OperatorDef:
        return self._defs[op_id]

    def is_operator(self, name: str) -> bool:
        """Tell whether ``name`` is a scheduled (non-sink) operator id."""
        d = self._defs.get(name)
        return d is not None and d.kind is not OperatorKind.SINK

    @cached_property
    def streams(self) -> tuple[str, ...]:
        """Input stream names, in order of first use."""
        seen: dict[str, None] = {}
        for op in self._order:
            for src in self._defs[op].inputs:
                if src not in self._defs:
                    seen.setdefault(src)
        return tuple(seen)

    @cached_property
    def queues(self) -> tuple[QueueId, ...]:
        """Every queue of the plan (edges into scheduled operators), in a stable order."""
        return tuple(QueueId(src, op) for op in self._order for src in self._defs[op].inputs)

    def input_queues(self, op_id: str) -> tuple[QueueId, ...]:
        """Return the queues ``op_id`` reads, in input order."""
        return tuple(QueueId(src, op_id) for src in self._defs[op_id].inputs)

    @cached_property
    def _consumers(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {name: [] for name in (*self._order, *self.streams)}
        for op in self._order:
            for src in self._defs[op].inputs:
                out[src].append(op)
        return {k: tuple(v) for k, v in out.items()}

    def consumers(self, name: str) -> tuple[str, ...]:
        """Scheduled operators reading the output of operator or stream ``name``."""
        return self._consumers.get(name, ())

    def output_queues(self, op_id: str) -> tuple[QueueId, ...]:
        """Queues that receive a copy of every output tuple of ``op_id`` (empty for roots)."""
        return tuple(QueueId(op_id, c) for c in self.consumers(op_id))

    def is_root(self, op_id: str) -> bool:
        """Tell whether the output of ``op_id`` leaves the system (no scheduled consumer)."""
        return not self.consumers(op_id)

    @cached_property
    def depth(self) -> Mapping[str, int]:
        """Longest distance from a leaf: 0 for leaves (operators reading only streams)."""
        depth: dict[str, int] = {}
        for op in self._order:
            ups = [depth[s] + 1 for s in self._defs[op].inputs if s in depth]
            depth[op] = max(ups, default=0)
        return depth

    def initial_stats(self) -> StatsTable:
        """Statistics built from the numbers in the definitions (defaults 1)."""
        return StatsTable.from_defs({op: self._defs[op] for op in self._order})

    def __repr__(self) -> str:
        return f"QueryPlan(operators={list(self._order)}, streams={list(self.streams)})"
