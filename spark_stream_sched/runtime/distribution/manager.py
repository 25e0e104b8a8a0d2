"""The distribution manager: the next micro-batch's group -> task assignment.

See Liu & Rundensteiner (2005), §5-§6.

In Liu & Rundensteiner (2005) a *distribution manager* (§3.3, fig. 5) collects each query
processor's statistics and makes the global adaptation decisions: move partition groups from the
fullest machine to the emptiest (§5.1), push the least productive ones to disk (lazy-disk /
active-disk, §6). Here the Spark driver plays that role at every micro-batch boundary, which
replaces the paper's 8-step move protocol (fig. 13): between two batches no tuple is in flight, and
a group's state is in its version file, so "moving" a group means that the next batch's task for it
is another one.

:func:`next_assignment` is a pure function of

* the previous batch's :class:`~spark_stream_sched.runtime.distribution.assignments.Assignment`
  (which task ran which group, ``P_o`` so far), and
* the previous batch's recorded per-task metrics (``group_loads``: per group ``P_s`` bytes in
  memory, results produced in that batch, bytes its join stages hold on disk — written by
  :class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`; active-disk's ``M_q`` is the
  sum of both byte counts over all groups),

through :func:`~spark_stream_sched.runtime.distribution.policy.plan_adaptation`. Nothing reads a
clock and ties are broken by group id (inside ``plan_adaptation``), so a batch planned again from
the same files gets the same assignment; the source records it anyway
(:mod:`~spark_stream_sched.runtime.distribution.assignments`), so a replay never depends on metrics
files surviving.

Deviations from the paper: a task's memory ``M_t`` is the sum of its groups' ``P_s`` (bytes of
Arrow state in memory, not the process's RSS, which Spark's Python workers share with other
tasks); a task's output rate is the results its groups produced in the previous micro-batch
(the sampling interval of §6 is one batch), divided by its group count inside
``plan_adaptation``; pushes apply only when the query has a join stage
(:func:`~.group_load.can_spill`): other operators have no clean-up stage to recover the results
a pushed group would miss (and pushes only the join stages' memory parts).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.distribution.assignments import Assignment
from spark_stream_sched.runtime.distribution.groups import initial_groups
from spark_stream_sched.runtime.distribution.policy import (
    POLICIES,
    GroupLoad,
    apply_plan,
    plan_adaptation,
)
from spark_stream_sched.runtime.durations import parse_bytes
from spark_stream_sched.runtime.names import did_you_mean
from spark_stream_sched.runtime.state import batch_metrics

log = logging.getLogger(__name__)

#: Spark option names read by :func:`adaptation_from_options`.
ADAPTATION_OPTIONS = ("adaptation", "thetaD", "thetaF", "stateMemoryBudget", "pushFraction")
DEFAULT_PUSH_FRACTION = 0.3


@dataclass(frozen=True)
class AdaptationConfig:
    """Options of distributed adaptation (picklable, validated).

    Attributes
    ----------
    policy
        ``none`` (fixed ranges of groups per task), ``lazy-disk`` or ``active-disk``.
    theta_d
        Move groups when ``M_l / M_m < theta_d`` (Liu & Rundensteiner 2005, §5.1; paper: 0.8).
    theta_f
        active-disk pushes when ``MaxRate / MinRate > theta_f`` (§6).
    budget
        ``stateMemoryBudget``: bytes of state in memory per task (None: no budget).
    push_fraction
        Least fraction of an overloaded task's memory pushed per plan (§4.4: 30%).
    """

    policy: str = "none"
    theta_d: float = 0.8
    theta_f: float = 2.0
    budget: int | None = None
    push_fraction: float = DEFAULT_PUSH_FRACTION

    @property
    def enabled(self) -> bool:
        """True unless the policy is ``none``."""
        return self.policy != "none"


def adaptation_from_options(opts: Mapping[str, str]) -> AdaptationConfig:
    """Parse the options of :data:`ADAPTATION_OPTIONS` (canonical names; absent: defaults).

    Raises
    ------
    ConfigError
        Naming the option and the value: an unknown policy (with a suggestion), ``thetaD``
        outside ``(0, 1]``, ``thetaF < 1``, a ``stateMemoryBudget`` that is not a positive size,
        ``pushFraction`` outside ``(0, 1]``.
    """
    text = opts.get("adaptation", "none").strip().lower()
    if text not in POLICIES:
        raise ConfigError(f"option adaptation={opts['adaptation']!r} is not one of "
                          f"{', '.join(POLICIES)}{did_you_mean(text, POLICIES)}")
    theta_d = _number(opts, "thetaD", 0.8)
    if not 0 < theta_d <= 1:
        raise ConfigError(f"option thetaD={opts['thetaD']!r} must be in (0, 1]: groups move "
                          f"when M_l / M_m < thetaD (Liu & Rundensteiner 2005 uses 0.8)")
    theta_f = _number(opts, "thetaF", 2.0)
    if not theta_f >= 1:
        raise ConfigError(f"option thetaF={opts['thetaF']!r} must be at least 1: active-disk "
                          f"pushes when MaxRate / MinRate > thetaF")
    budget = None
    if opts.get("stateMemoryBudget", "").strip():
        try:
            budget = parse_bytes(opts["stateMemoryBudget"], "value")
        except ConfigError as exc:
            raise ConfigError(f"option stateMemoryBudget: {exc}") from exc
        if budget <= 0:
            raise ConfigError(f"option stateMemoryBudget={opts['stateMemoryBudget']!r} must be "
                              f"a positive size per task, e.g. 512m")
    push_fraction = _number(opts, "pushFraction", DEFAULT_PUSH_FRACTION)
    if not 0 < push_fraction <= 1:
        raise ConfigError(f"option pushFraction={opts['pushFraction']!r} must be in (0, 1]: "
                          f"the least share of an over-budget task's state pushed at once "
                          f"(Liu & Rundensteiner 2005, §4.4 uses 0.3)")
    ignored = [n for n in ("thetaD", "thetaF", "pushFraction") if opts.get(n, "").strip()]
    if text == "none" and ignored:
        log.warning("options %s are ignored with adaptation=none", "/".join(ignored))
    return AdaptationConfig(text, theta_d, theta_f, budget, push_fraction)


def _number(opts: Mapping[str, str], name: str, default: float) -> float:
    text = opts.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"option {name}={opts[name]!r} is not a number") from None
    if value != value:  # NaN
        raise ConfigError(f"option {name}={opts[name]!r} is not a number")
    return value


def loads_from_parts(parts: Sequence[Mapping[str, Any]], n_groups: int
                     ) -> dict[int, tuple[int, int, int]] | None:
    """Per group ``(P_s bytes, results in the batch, bytes on disk)`` from a batch's metrics.

    Metrics written before bytes on disk were reported give ``1`` for a spilled group.

    None when some group is missing (metrics of a batch planned without them, or lost): the
    distribution manager then keeps the assignment as it is.
    """
    loads: dict[int, tuple[int, int, int]] = {}
    for part in parts:
        for key, (size, out, spilled) in dict(part.get("group_loads") or {}).items():
            loads[int(key)] = (int(size), int(out), int(spilled))
    return loads if set(loads) == set(range(n_groups)) else None


def next_assignment(version: str, previous: Assignment | None,
                    parts: Sequence[Mapping[str, Any]], n_groups: int, n_tasks: int,
                    config: AdaptationConfig, spillable: bool) -> Assignment:
    """The assignment of the batch ending at ``version`` (see the module docstring).

    ``previous`` is the record of the batch that ended at this batch's start (None: the first
    batch, or a state written without adaptation: contiguous ranges); ``parts`` are that batch's
    task metrics; ``spillable``: whether pushes may apply (:func:`~.group_load.can_spill`).
    """
    base = previous if previous is not None and previous.tasks == n_tasks and len(
        previous.groups) == n_groups else None
    groups = base.groups if base is not None else initial_groups(n_groups, n_tasks)
    before = base.produced if base is not None and len(base.produced) == n_groups else (
        (0,) * n_groups)
    active_pushed = base.active_pushed if base is not None else 0
    loads = loads_from_parts(parts, n_groups)
    if loads is None:
        why = ("no group metrics of a previous batch" if not parts else
               "the previous batch's group metrics are incomplete") + ": no adaptation"
        return Assignment(version, n_tasks, groups, (), before, active_pushed=active_pushed,
                          reason=why)
    produced = tuple(before[g] + loads[g][1] for g in range(n_groups))
    group_loads = [GroupLoad(g, groups[g], loads[g][0], produced[g], loads[g][2] > 0)
                   for g in range(n_groups)]
    # M_q (§6): what the query's state would take in memory with nothing pushed
    query_memory = sum(loads[g][0] + loads[g][2] for g in range(n_groups))
    rates = {t: float(sum(loads[g][1] for g in range(n_groups) if groups[g] == t))
             for t in sorted(set(groups))}
    plan = plan_adaptation(group_loads, n_tasks, policy=config.policy, theta_d=config.theta_d,
                           theta_f=config.theta_f, budget=config.budget,
                           push_fraction=config.push_fraction, rates=rates,
                           query_memory=query_memory, active_pushed=active_pushed)
    pushes = plan.pushes if spillable else ()
    after = apply_plan(dict(enumerate(groups)), plan)
    reason = plan.reason if spillable or not plan.pushes else (
        plan.reason + "; pushes skipped: the query's last stage is not a join without a window")
    return Assignment(
        version, n_tasks, tuple(after[g] for g in range(n_groups)),
        tuple(sorted(p.group for p in pushes)), produced,
        tuple((x.group, x.task, x.size, x.produced, int(x.spilled)) for x in group_loads),
        tuple((m.group, m.source, m.target, m.size) for m in plan.moves),
        active_pushed + (sum(p.size for p in pushes) if plan.active else 0), reason)


def batch_assignment(location: str, first: str | None, last: str, n_groups: int, n_tasks: int,
                     config: AdaptationConfig, spillable: bool) -> Assignment:
    """The group -> task assignment of the batch from version ``first`` to ``last``.

    The one recorded for ``last`` if there is one (a batch Spark replays after a driver crash
    runs exactly as first planned); else, with adaptation on, :func:`next_assignment` from the
    previous batch's recorded assignment and task metrics, written durably *before* any task
    runs; with ``adaptation=none`` contiguous ranges (nothing recorded). ``first`` None: the
    query's first batch. Called on the driver; a function of files under ``location`` only.
    """
    recorded = assignments.read_assignment(location, last)
    if recorded is not None:
        log.info("batch ending at %s: recorded assignment reused (%s)", last, recorded.reason)
        return recorded
    if not config.enabled:
        return Assignment(last, n_tasks, initial_groups(n_groups, n_tasks),
                          reason="adaptation=none: contiguous ranges of groups")
    previous, parts = None, []
    if first is not None:
        previous = assignments.read_assignment(location, first)
        parts = _parts(location, first)
    chosen = next_assignment(last, previous, parts, n_groups, n_tasks, config, spillable)
    assignments.write_assignment(location, chosen)
    log.info("batch ending at %s: %s; moves %s, pushes %s", last, chosen.reason,
             list(chosen.moves), list(chosen.pushes))
    return chosen


def _parts(location: str, version: str) -> list[dict[str, Any]]:
    """The previous batch's task metrics ([] if unreadable: then nothing is adapted)."""
    try:
        return batch_metrics.read_parts(location, version)
    except (OSError, ValueError) as exc:
        log.warning("cannot read the metrics of version %s (%s): no adaptation at this batch",
                    version, exc)
        return []
