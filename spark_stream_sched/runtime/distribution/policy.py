"""Distributed adaptation of partition groups across tasks: lazy-disk, active-disk.

See Liu & Rundensteiner (2005), §5-6.

Pure policy: from each partition group's statistics (:class:`GroupLoad`: its task, ``P_s``,
``P_o``, whether it has generations on disk) and, for active-disk, the tasks' output rates, a
*distribution manager* (the Spark driver at a micro-batch boundary, which replaces the paper's
8-step protocol of fig. 13) computes a :class:`Plan`: groups to **move** between tasks and groups
to **push** to disk. Nothing here does I/O, reads a clock or depends on dict order; ties are
broken by group id, then task id, so the same loads always give the same plan.

Vocabulary (Liu & Rundensteiner 2005):

``M_t``
    memory of task ``t``: the sum of ``P_s`` of its groups (0 for a task without groups);
    ``M_m`` the largest, ``M_l`` the smallest (the *sender* and the *receiver*, §5.1; ties: the
    lowest task id).
productivity
    ``P_s / P_o`` (§4.3): small is productive; ``P_o = 0`` counts as infinite (least productive).

Rules:

**Distributed adaptation** (§5.1). When ``M_l / M_m < theta_d`` (paper: 0.8), move about
``(M_m - M_l) / 2`` bytes of the sender's *most productive* groups to the receiver: groups in
productivity order (ties by id), each taken only if it strictly narrows the sender/receiver gap
(``size < (M_m - M_l) - 2 * moved``), until ``(M_m - M_l) / 2`` bytes are reached. Hence the
moved bytes lie within ``(M_m - M_l)/2`` plus or minus one group's size, the sender never ends
lighter than the receiver was (``moved < M_m - M_l``), every task's memory stays within
``[M_l, M_m]`` and the ratio ``M_l / M_m`` never gets worse. Groups of size 0 never move.

**lazy-disk** (§6, fig. 18). Disk adaptation is postponed until rebalancing cannot help:

1. one distributed adaptation (one sender -> receiver pair per call: "only one adaptation will
   be processed at a time"), triggered by ``theta_d`` as above, **or** when the sender is over
   ``budget`` while the receiver is under it (memory for the overloaded task exists elsewhere
   in the cluster -- the paper's "postpone ... until there is no main memory in the cluster that
   can hold the states"); groups that have generations on disk are never moved ("to avoid
   unnecessary overhead and complexity in the clean up stage");
2. then every task still over ``budget`` after the moves pushes its least productive groups
   (largest ``P_s/P_o`` first, ties by id; not the groups being moved) until at least
   ``push_fraction`` of its memory is pushed and the rest fits the budget -- the local
   throughput-oriented disk adaptation of §4.3 (30% push, §4.4). ``budget=None``: never push.

**active-disk** (§6, fig. 19). The lazy-disk plan when it moves or pushes anything. Otherwise,
when memory is balanced (``M_l / M_m >= theta_d``) and the average output rates differ,
``MaxRate / MinRate > theta_f``, the task with the *lowest* average rate pushes its least
productive groups, about ``push_fraction`` of its memory, and over the whole run at most
``M_q - M_c`` bytes when both are known (``M_c = tasks * budget``), so that memory is left for
the productive groups of the high-rate tasks, which later distributed adaptations move there.
The average output rate of a task is, as in §6, the results it produced in the last sampling
interval (``rates[t]``, e.g. the previous micro-batch) divided by its number of partition
groups; tasks without groups or without a rate are left out of the comparison.

Deviations from the paper, and why:

* The paper's machines push locally whenever ``M_u / M_a > theta_m``; here pushes are decided
  by the same planner at batch boundaries (the budget is checked between micro-batches), so the
  "not concurrent" restriction becomes "a group being moved is not pushed in the same plan".
* The inactivity rule of §4.3 (``theta_t``: idle groups first) is left to the join's local
  disk adaptation (:func:`~.join_state.push_order`), which knows ``T_u``; the planner sees no time.
* The brief asked active-disk to push "from the task with the highest rate"; the paper says
  "force the partitions of the lower output rate machine to be pushed into disks", which is
  what this module does (pushing the productive task's groups would lower throughput, the
  opposite of the rule's purpose).
* ``M_q`` (the estimated memory of the whole query) is the optional ``query_memory`` argument:
  the Spark source passes the state of every group in memory plus what its joins hold on disk
  (:func:`~spark_stream_sched.runtime.distribution.manager.next_assignment`), the bench
  extrapolates it. Without it (or without a ``budget``, which gives ``M_c = tasks * budget``)
  only the ``push_fraction`` bound applies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.io import suggest

POLICIES = ("none", "lazy-disk", "active-disk")


@dataclass(frozen=True)
class GroupLoad:
    """Statistics of one partition group as reported by the task holding it.

    See Liu & Rundensteiner (2005), §4.3.

    Attributes
    ----------
    group
        Partition-group id (unique in one call).
    task
        Task (Spark task index, ``0 .. tasks-1``) currently holding it.
    size
        ``P_s``: bytes of its memory-resident state.
    produced
        ``P_o``: results it has produced so far.
    spilled
        True if it has generations on disk (lazy-disk never moves such a group).
    """

    group: int
    task: int
    size: int
    produced: int
    spilled: bool = False


@dataclass(frozen=True)
class Move:
    """Move group ``group`` (``size`` bytes in memory) from task ``source`` to ``target``."""

    group: int
    source: int
    target: int
    size: int


@dataclass(frozen=True)
class Push:
    """Push the memory part of group ``group`` (``size`` bytes) on task ``task`` to disk."""

    group: int
    task: int
    size: int


@dataclass(frozen=True)
class Plan:
    """What a distribution manager does at one adaptation point.

    Attributes
    ----------
    moves
        Groups to move, all from one sender to one receiver, in the order they were chosen.
    pushes
        Groups to push; ``task`` is the group's task *after* the moves.
    reason
        Why (or why nothing), with the measured ratios and thresholds.
    active
        True if the pushes are active-disk's (count their bytes into ``active_pushed``).
    """

    moves: tuple[Move, ...]
    pushes: tuple[Push, ...]
    reason: str
    active: bool = False


def plan_adaptation(groups: Sequence[GroupLoad], tasks: int, *, policy: str = "lazy-disk",
                    theta_d: float = 0.8, theta_f: float = 2.0, budget: int | None = None,
                    push_fraction: float = 0.3, rates: Mapping[int, float] | None = None,
                    query_memory: int | None = None, active_pushed: int = 0) -> Plan:
    """The adaptation plan for ``groups`` spread over ``tasks`` tasks (see the module docstring).

    Parameters
    ----------
    groups
        Every partition group's load; any order (the plan does not depend on it).
    tasks
        Number of tasks (tasks holding no group count with ``M_t = 0``).
    policy
        ``"lazy-disk"``, ``"active-disk"`` or ``"none"`` (an empty plan).
    theta_d
        Distributed adaptation starts when ``M_l / M_m < theta_d`` (Liu & Rundensteiner 2005, §5.1),
        in (0, 1].
    theta_f
        Active-disk pushes when ``MaxRate / MinRate > theta_f`` (§6), at least 1.
    budget
        Bytes of memory per task; a task above it pushes (None: never push for the budget).
    push_fraction
        Least fraction of an overloaded task's memory pushed per plan (§4.4: 30%), in (0, 1].
    rates
        Task -> results produced in the last sampling interval (active-disk only).
    query_memory
        ``M_q``, the estimated memory of the whole query: active-disk pushes at most
        ``M_q - tasks * budget`` bytes over the run (§6).
    active_pushed
        Bytes active-disk plans have already pushed in this run (the caller keeps the count);
        deducted from ``M_q - tasks * budget``.

    Returns
    -------
    Plan
        Moves from one sender to one receiver, then pushes; equal inputs give equal plans.

    Raises
    ------
    ConfigError
        Naming the offending value: unknown policy, ``theta_d`` outside (0, 1], ``theta_f < 1``,
        ``push_fraction`` outside (0, 1], ``tasks < 1``, a negative budget, size, count or rate,
        a task outside ``0 .. tasks-1`` or a duplicate group id.
    """
    _check(groups, tasks, policy, theta_d, theta_f, budget, push_fraction, rates, query_memory)
    if active_pushed < 0:
        raise ConfigError(f"active_pushed must be >= 0 bytes, got {active_pushed!r}")
    ordered = sorted(groups, key=lambda g: g.group)
    if policy == "none":
        return Plan((), (), "policy 'none': no adaptation")
    plan = _lazy_disk(ordered, tasks, theta_d, budget, push_fraction)
    if policy == "lazy-disk" or plan.moves or plan.pushes:
        return plan
    memory = memory_per_task(ordered, tasks)
    if min(memory) < theta_d * max(memory):  # unbalanced, but no group could move
        return plan
    cap = None
    if query_memory is not None and budget is not None:
        cap = max(0, query_memory - tasks * budget - active_pushed)
    return _active_disk(ordered, tasks, theta_f, cap, push_fraction, rates or {}, plan.reason)


def apply_plan(assignment: Mapping[int, int], plan: Plan) -> dict[int, int]:
    """Group -> task after ``plan``'s moves (pushed groups stay where they are).

    Raises
    ------
    ValueError
        If a move names a group that is not in ``assignment`` or not on the move's source.
    """
    after = {int(g): int(t) for g, t in sorted(assignment.items())}
    for move in plan.moves:
        if after.get(move.group) != move.source:
            raise ConfigError(f"move of group {move.group} from task {move.source}: the group "
                              f"is on task {after.get(move.group)}; plan against the current "
                              f"assignment")
        after[move.group] = move.target
    return after


def memory_per_task(groups: Iterable[GroupLoad], tasks: int) -> list[int]:
    """``M_t`` for ``t = 0 .. tasks-1``: the sum of its groups' ``P_s``."""
    memory = [0] * tasks
    for g in groups:
        memory[g.task] += g.size
    return memory


def productivity(g: GroupLoad) -> Fraction | float:
    """``P_s / P_o`` (Liu & Rundensteiner 2005, §4.3), exact; ``inf`` if it produced nothing."""
    return Fraction(g.size, g.produced) if g.produced else math.inf


# -- lazy-disk: one distributed adaptation, then local pushes -----------------------------------

def _lazy_disk(groups: list[GroupLoad], tasks: int, theta_d: float, budget: int | None,
               fraction: float) -> Plan:
    memory = memory_per_task(groups, tasks)
    sender = min(range(tasks), key=lambda t: (-memory[t], t))
    receiver = min(range(tasks), key=lambda t: (memory[t], t))
    high, low = memory[sender], memory[receiver]
    if high == 0:
        return Plan((), (), f"no memory-resident state on {tasks} task(s)")
    ratio = low / high
    why = f"M_l/M_m = {low}/{high} = {ratio:.3f} (theta_d = {theta_d})"
    overloaded = budget is not None and high > budget > low
    moves: tuple[Move, ...] = ()
    if sender != receiver and (ratio < theta_d or overloaded):
        moves = _choose_moves(groups, sender, receiver, high - low)
        trigger = "< theta_d" if ratio < theta_d else f"and task {sender} over budget {budget}"
        why += f" {trigger}: move {sum(m.size for m in moves)} B of {len(moves)} group(s) " \
               f"from task {sender} to task {receiver}"
    else:
        why += ": balanced, no move"
    pushes = _budget_pushes(groups, tasks, moves, budget, fraction)
    if pushes:
        over = sorted({p.task for p in pushes})
        why += f"; task(s) {over} still over budget {budget} after the moves: push " \
               f"{sum(p.size for p in pushes)} B of {len(pushes)} group(s)"
    return Plan(moves, pushes, why)


def _choose_moves(groups: list[GroupLoad], sender: int, receiver: int, gap: int
                  ) -> tuple[Move, ...]:
    """The sender's most productive groups, about ``gap / 2`` bytes, each narrowing the gap."""
    candidates = sorted((g for g in groups if g.task == sender and g.size and not g.spilled),
                        key=lambda g: (productivity(g), g.group))
    moves, moved = [], 0
    for g in candidates:
        if 2 * moved >= gap:
            break
        if g.size < gap - 2 * moved:
            moves.append(Move(g.group, sender, receiver, g.size))
            moved += g.size
    return tuple(moves)


def _budget_pushes(groups: list[GroupLoad], tasks: int, moves: tuple[Move, ...],
                   budget: int | None, fraction: float) -> tuple[Push, ...]:
    """Pushes of every task still over ``budget`` after ``moves``.

    See Liu & Rundensteiner (2005), §4.3-§4.4.
    """
    if budget is None:
        return ()
    target = {m.group: m.target for m in moves}
    after = [GroupLoad(g.group, target.get(g.group, g.task), g.size, g.produced, g.spilled)
             for g in groups]
    memory = memory_per_task(after, tasks)
    pushes: list[Push] = []
    for task in (t for t in range(tasks) if memory[t] > budget):
        mine = [g for g in after if g.task == task and g.group not in target]
        pushes += _least_productive(mine, fraction * memory[task], memory[task] - budget, None)
    return tuple(pushes)


def _least_productive(groups: list[GroupLoad], at_least: float, excess: int,
                      at_most: int | None) -> list[Push]:
    """Least productive first, until ``at_least`` and ``excess`` bytes are pushed.

    A group that would take the total over ``at_most`` (if given) is skipped.
    """
    pushes, pushed = [], 0
    for g in sorted((g for g in groups if g.size), key=lambda g: (-productivity(g), g.group)):
        if pushed >= at_least and pushed >= excess:
            break
        if at_most is None or pushed + g.size <= at_most:
            pushes.append(Push(g.group, g.task, g.size))
            pushed += g.size
    return pushes


# -- active-disk: push the low-rate task's unproductive groups when memory is balanced -----------

def _active_disk(groups: list[GroupLoad], tasks: int, theta_f: float, cap: int | None,
                 fraction: float, rates: Mapping[int, float], balanced: str) -> Plan:
    counts = [0] * tasks
    for g in groups:
        counts[g.task] += 1
    average = {t: rates[t] / counts[t] for t in sorted(rates) if counts[t]}
    if len(average) < 2:
        return Plan((), (), f"{balanced}; fewer than two tasks with groups and a rate")
    fast = min(average, key=lambda t: (-average[t], t))
    slow = min(average, key=lambda t: (average[t], t))
    top, bottom = average[fast], average[slow]
    rate_ratio = top / bottom if bottom else (math.inf if top else 1.0)
    why = f"{balanced}; MaxRate/MinRate = {top:.4g}/{bottom:.4g} = {rate_ratio:.3g} " \
          f"(theta_f = {theta_f})"
    if rate_ratio <= theta_f:
        return Plan((), (), why + ": no active push")
    memory = memory_per_task(groups, tasks)[slow]
    mine = [g for g in groups if g.task == slow]
    pushes = tuple(_least_productive(mine, fraction * memory, 0, cap))
    return Plan((), pushes, why + f" > theta_f: task {slow} (lowest rate) pushes "
                f"{sum(p.size for p in pushes)} B of {len(pushes)} group(s)"
                + (f", at most {cap} B left of M_q - M_c" if cap is not None else ""),
                active=bool(pushes))


# -- validation ------------------------------------------------------------------------------

def _check(groups: Sequence[GroupLoad], tasks: int, policy: str, theta_d: float,
           theta_f: float, budget: int | None, fraction: float,
           rates: Mapping[int, float] | None, query_memory: int | None) -> None:
    """Raise :class:`ConfigError` naming the first invalid argument."""
    if policy not in POLICIES:
        raise ConfigError(f"adaptation policy {policy!r} is unknown{suggest(policy, POLICIES)}")
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
        raise ConfigError(f"tasks must be an integer >= 1, got {tasks!r}")
    if not 0 < theta_d <= 1:
        raise ConfigError(f"theta_d must be in (0, 1] (start when M_l/M_m < theta_d), "
                          f"got {theta_d!r}")
    if not theta_f >= 1:
        raise ConfigError(f"theta_f must be >= 1 (MaxRate/MinRate is at least 1), got {theta_f!r}")
    if not 0 < fraction <= 1:
        raise ConfigError(f"push_fraction must be in (0, 1], got {fraction!r}")
    for name, value in (("budget", budget), ("query_memory", query_memory)):
        if value is not None and value < 0:
            raise ConfigError(f"{name} must be >= 0 bytes or None, got {value!r}")
    seen: set[int] = set()
    for g in groups:
        if g.group in seen:
            raise ConfigError(f"partition group {g.group} is listed twice; report each once")
        seen.add(g.group)
        if g.size < 0 or g.produced < 0:
            raise ConfigError(f"partition group {g.group}: size and produced must be >= 0, "
                              f"got size={g.size} produced={g.produced}")
        if not 0 <= g.task < tasks:
            raise ConfigError(f"partition group {g.group} is on task {g.task}, outside "
                              f"0..{tasks - 1}")
    for task, rate in (rates or {}).items():
        if not 0 <= task < tasks or not (math.isfinite(rate) and rate >= 0):
            raise ConfigError(f"rate {rate!r} of task {task!r}: tasks are 0..{tasks - 1} and "
                              f"rates finite and >= 0")
