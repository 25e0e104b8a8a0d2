"""Runs of ``bench adaptation``: one join under a disk budget, or several as a "cluster".

:func:`run_disk` feeds the runtime's ``join(3)`` micro-batch by micro-batch; after each batch,
when its memory-resident state exceeds the budget, groups are pushed to disk with
:meth:`~..runtime.keyed.join.Join.push_group` in one of three orders (Liu & Rundensteiner 2005,
§4.3-§4.4): ``random`` (fig. 9: "we randomly choose partitions"), ``low`` (largest ``P_s/P_o``
first: the throughput-oriented rule, the same order as the join's built-in disk adaptation) or
``high`` (smallest ``P_s/P_o`` first: fig. 11's other end), until ``fraction`` of the memory is
pushed and the rest fits. :meth:`Join.finish` is the clean-up stage (Eq. 1).

:func:`run_cluster` plays Liu & Rundensteiner (2005), §5-§6 in one process: one join instance per
"task", a router (the paper's *split* operator) sending each partition group's tuples to the
instance holding it, and between batches the distribution manager:
:func:`~..runtime.distribution.policy.plan_adaptation` on the groups' ``P_s``/``P_o`` and the tasks'
output rates over the last interval; moves go through the group's checksummed bytes
(:func:`~..runtime.keyed.join_transfer.encode_group`), as they would between hosts, and pushes
through ``push_group``.

Both return a :class:`Run` with the results' ids for the oracle check, and per-batch timelines
(cumulative results of the normal run, memory per task) for the plots.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.bench.adaptation_data import make_join, result_ids
from spark_stream_sched.runtime.distribution.policy import GroupLoad, Plan, plan_adaptation
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_transfer import decode_group, encode_group

ORDERS = ("random", "low", "high")


@dataclass
class Run:
    """Measurements of one run (times in seconds; ``ids`` are not reported)."""

    normal_results: int = 0
    normal_seconds: float = 0.0
    cleanup_results: int = 0
    cleanup_seconds: float = 0.0
    pushes: int = 0
    pushed_bytes: int = 0
    moves: int = 0
    moved_bytes: int = 0
    adaptations: int = 0
    move_seconds: float = 0.0
    curve: list[int] = field(default_factory=list)
    memory: list[list[int]] = field(default_factory=list)
    ids: np.ndarray | None = None

    def report(self) -> dict[str, Any]:
        """The JSON-able measurements."""
        return {k: v for k, v in self.__dict__.items() if k != "ids"}


@dataclass(frozen=True)
class ClusterConfig:
    """Distribution-manager settings of :func:`run_cluster` (Liu & Rundensteiner 2005, §5-§6)."""

    tasks: int
    policy: str
    budget: int | None = None
    theta_d: float = 0.8
    theta_f: float = 2.0
    push_fraction: float = 0.3
    adapt_every: int = 1


def disk_pushes(stats: list[dict[str, Any]], budget: int, fraction: float, order: str,
                rng: np.random.Generator) -> list[int]:
    """Groups to push when the memory part exceeds ``budget``.

    See Liu & Rundensteiner (2005), §4.3-§4.4.
    """
    total = sum(int(s["P_s"]) for s in stats)
    if total <= budget:
        return []
    live = [s for s in stats if s["P_s"]]

    def productivity(s: dict[str, Any]) -> float:
        return s["P_s"] / s["P_o"] if s["P_o"] else math.inf

    if order == "random":
        live = [live[i] for i in rng.permutation(len(live))]
    else:
        sign = -1 if order == "low" else 1
        live.sort(key=lambda s: (sign * productivity(s), s["group"]))
    chosen, pushed = [], 0
    for s in live:
        if pushed >= fraction * total and total - pushed <= budget:
            break
        chosen.append(int(s["group"]))
        pushed += int(s["P_s"])
    return chosen


def batches(table: pa.Table, batch_rows: int) -> list[tuple[int, int]]:
    """``(start, length)`` of the micro-batches."""
    return [(lo, min(batch_rows, table.num_rows - lo)) for lo in range(0, table.num_rows,
                                                                         batch_rows)]


def run_disk(table: pa.Table, n_groups: int, budget: int | None, fraction: float, order: str,
             batch_rows: int, seed: int = 0) -> Run:
    """One join, pushing in ``order`` when over ``budget`` (None: never), then clean-up."""
    rng, run, outputs = np.random.default_rng(seed), Run(), []
    with tempfile.TemporaryDirectory(prefix="bench-adapt-") as spill:
        op = make_join(n_groups, spill_dir=spill)
        start = time.perf_counter()
        for lo, n in batches(table, batch_rows):
            outputs.append(op.update(table.slice(lo, n), None))
            run.normal_results += outputs[-1].num_rows
            if budget is not None:
                for gid in disk_pushes(op.groups_stats(), budget, fraction, order, rng):
                    run.pushed_bytes += op.push_group(gid)
            run.curve.append(run.normal_results)
            run.memory.append([op.state_bytes])
        run.normal_seconds = time.perf_counter() - start
        _clean_up(run, [op], outputs)
    return run


def _clean_up(run: Run, ops: list[Join], outputs: list[pa.Table]) -> None:
    """Time the clean-up stage of every instance and collect the results' ids."""
    start = time.perf_counter()
    cleaned = [op.finish() for op in ops]
    run.cleanup_seconds = time.perf_counter() - start
    run.cleanup_results = sum(t.num_rows for t in cleaned)
    run.pushes = sum(op.counts.pushes for op in ops)
    run.ids = result_ids([*outputs, *cleaned])


class Cluster:
    """Join instances, the group -> task assignment, and the moves between them."""

    def __init__(self, n_groups: int, owner: list[int], tasks: int, spill: str) -> None:
        self.joins = [make_join(n_groups, spill_dir=spill) for _ in range(tasks)]
        self.owner = np.asarray(owner, np.int64)
        self.produced = np.zeros(tasks, np.int64)

    def step(self, rows: pa.Table, groups: np.ndarray) -> list[pa.Table]:
        """Route ``rows`` (their partition ``groups``) to their tasks; the tasks' results."""
        task = self.owner[np.maximum(groups, 0)]
        out = [op.update(rows.filter(pa.array(task == t)), None)
               for t, op in enumerate(self.joins)]
        self.produced += [o.num_rows for o in out]
        return out

    def loads(self) -> list[GroupLoad]:
        """Every group's load as its task reports it."""
        return [GroupLoad(g, int(t), int(s["P_s"]), int(s["P_o"]), bool(s["generations"]))
                for g, t in enumerate(self.owner)
                for s in (self.joins[t].groups_stats()[g],)]

    def apply(self, plan: Plan) -> tuple[int, int]:
        """Carry out ``plan``: moves as bytes between instances, then pushes; bytes of each."""
        moved = pushed = 0
        for m in plan.moves:
            data = encode_group(self.joins[m.source].take_group(m.group))
            self.joins[m.target].give_group(decode_group(data))
            self.owner[m.group] = m.target
            moved += m.size
        for p in plan.pushes:
            pushed += self.joins[p.task].push_group(p.group)
        return moved, pushed


def run_cluster(table: pa.Table, n_groups: int, owner: list[int], config: ClusterConfig,
                batch_rows: int) -> Run:
    """Several join instances with a distribution manager between batches (module docstring)."""
    run, outputs = Run(), []
    groups = make_join(n_groups).group_of(table)
    with tempfile.TemporaryDirectory(prefix="bench-adapt-") as spill:
        cluster = Cluster(n_groups, owner, config.tasks, spill)
        active_pushed, last = 0, np.zeros(config.tasks, np.int64)
        start = time.perf_counter()
        for b, (lo, n) in enumerate(batches(table, batch_rows)):
            outputs += cluster.step(table.slice(lo, n), groups[lo:lo + n])
            if (b + 1) % config.adapt_every == 0:
                plan = _plan(cluster, config, cluster.produced - last, active_pushed,
                             (lo + n) / table.num_rows, run.pushed_bytes)
                tick = time.perf_counter()
                moved, pushed = cluster.apply(plan)
                run.move_seconds += time.perf_counter() - tick
                last = cluster.produced.copy()
                run.moved_bytes += moved
                run.pushed_bytes += pushed
                active_pushed += pushed if plan.active else 0
                run.moves += len(plan.moves)
                run.adaptations += bool(plan.moves)
            run.normal_results = int(cluster.produced.sum())
            run.curve.append(run.normal_results)
            run.memory.append([op.state_bytes for op in cluster.joins])
        run.normal_seconds = time.perf_counter() - start
        _clean_up(run, cluster.joins, outputs)
    return run


def _plan(cluster: Cluster, config: ClusterConfig, rates: np.ndarray, active_pushed: int,
          done: float, pushed: int) -> Plan:
    """The manager's plan; ``M_q`` extrapolated linearly from the state so far (unwindowed)."""
    loads = cluster.loads()
    in_memory = sum(g.size for g in loads)
    return plan_adaptation(loads, config.tasks, policy=config.policy, theta_d=config.theta_d,
                           theta_f=config.theta_f, budget=config.budget,
                           push_fraction=config.push_fraction,
                           rates={t: float(r) for t, r in enumerate(rates)},
                           query_memory=int((in_memory + pushed) / done),
                           active_pushed=active_pushed)
