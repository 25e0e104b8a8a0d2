"""The distributed-adaptation planner follows Liu & Rundensteiner (2005), §5-§6 for any loads.

Properties (Hypothesis) over random groups, tasks, budgets, thresholds and rates:

* the plan does not depend on the order the groups are listed in;
* moves go from the fullest task to the emptiest only, carry ``(M_m - M_l)/2`` bytes give or
  take one group, never make ``M_l / M_m`` worse and never overshoot;
* lazy-disk never moves a spilled group, and does not push when its moves bring every task
  under the budget (with two tasks: whenever the total fits with a group's slack);
* active-disk differs from lazy-disk only when memory is balanced and
  ``MaxRate / MinRate > theta_f``, and then pushes only the lowest-rate task's groups;
* :func:`apply_plan` keeps every group on exactly one task.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.distribution.policy import (
    GroupLoad,
    Move,
    Plan,
    Push,
    apply_plan,
    memory_per_task,
    plan_adaptation,
)

PROFILE = settings(max_examples=300, deadline=None)


@st.composite
def loads(draw: st.DrawFn, max_tasks: int = 4) -> tuple[list[GroupLoad], int]:
    """Groups with unique ids over 1..max_tasks tasks: equal sizes, zero sizes, spilled ones."""
    tasks = draw(st.integers(1, max_tasks))
    ids = draw(st.lists(st.integers(0, 200), unique=True, max_size=24))
    groups = [GroupLoad(gid, draw(st.integers(0, tasks - 1)),
                        draw(st.sampled_from([0, 10, 10, 100]) | st.integers(0, 1000)),
                        draw(st.sampled_from([0, 1, 5]) | st.integers(0, 500)),
                        draw(st.booleans())) for gid in ids]
    return groups, tasks


@st.composite
def options(draw: st.DrawFn, tasks: int) -> dict[str, object]:
    budget = draw(st.none() | st.integers(0, 3000))
    rates = draw(st.dictionaries(st.integers(0, tasks - 1),
                                 st.sampled_from([0.0, 1.0]) | st.floats(0, 1e4)))
    return {"theta_d": draw(st.sampled_from([0.5, 0.8, 1.0]) | st.floats(0.01, 1.0)),
            "theta_f": draw(st.sampled_from([1.0, 2.0]) | st.floats(1.0, 50.0)),
            "budget": budget, "push_fraction": draw(st.sampled_from([0.1, 0.3, 1.0])),
            "rates": rates}


def ratio(memory: Sequence[int]) -> float:
    return min(memory) / max(memory) if max(memory) else 1.0


def after_moves(groups: list[GroupLoad], plan: Plan, tasks: int) -> list[int]:
    where = apply_plan({g.group: g.task for g in groups}, plan)
    return memory_per_task([GroupLoad(g.group, where[g.group], g.size, g.produced)
                            for g in groups], tasks)


@PROFILE
@given(st.data(), loads(), st.sampled_from(["lazy-disk", "active-disk", "none"]))
def test_plan_does_not_depend_on_the_order_of_the_groups(data: st.DataObject, case: tuple[
        list[GroupLoad], int], policy: str) -> None:
    groups, tasks = case
    kwargs = data.draw(options(tasks))
    shuffled = data.draw(st.permutations(groups))
    assert plan_adaptation(groups, tasks, policy=policy, **kwargs) == plan_adaptation(
        shuffled, tasks, policy=policy, **kwargs)  # type: ignore[arg-type]


@PROFILE
@given(st.data(), loads(), st.sampled_from(["lazy-disk", "active-disk"]))
def test_moves_go_from_the_fullest_to_the_emptiest_and_balance(
        data: st.DataObject, case: tuple[list[GroupLoad], int], policy: str) -> None:
    groups, tasks = case
    plan = plan_adaptation(groups, tasks, policy=policy, **data.draw(options(tasks)))
    memory = memory_per_task(groups, tasks)
    if not plan.moves:
        return
    sender = memory.index(max(memory))
    receiver = memory.index(min(memory))
    assert {(m.source, m.target) for m in plan.moves} == {(sender, receiver)}
    by_id = {g.group: g for g in groups}
    assert all(by_id[m.group].task == sender and m.size == by_id[m.group].size > 0
               for m in plan.moves)
    moved, gap = sum(m.size for m in plan.moves), max(memory) - min(memory)
    movable = [g for g in groups if g.task == sender and not g.spilled]
    biggest = max(g.size for g in movable)
    assert moved <= gap / 2 + biggest
    assert moved >= min(gap / 2 - biggest, sum(g.size for g in movable))
    assert moved < gap  # the sender never ends lighter than the receiver was
    after = after_moves(groups, plan, tasks)
    assert min(memory) <= min(after)
    assert max(after) <= max(memory)
    assert ratio(after) >= ratio(memory)


@PROFILE
@given(st.data(), loads())
def test_lazy_disk_never_moves_spilled_groups_nor_pushes_needlessly(
        data: st.DataObject, case: tuple[list[GroupLoad], int]) -> None:
    groups, tasks = case
    kwargs = data.draw(options(tasks))
    plan = plan_adaptation(groups, tasks, policy="lazy-disk", **kwargs)
    spilled = {g.group for g in groups if g.spilled}
    assert not spilled & {m.group for m in plan.moves}
    budget = kwargs["budget"]
    after = after_moves(groups, plan, tasks)
    if budget is None or max(after) <= budget:  # type: ignore[operator]
        assert plan.pushes == ()
    assert not {p.group for p in plan.pushes} & {m.group for m in plan.moves}


@PROFILE
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(1, 300), st.integers(0, 50)),
                max_size=16), st.integers(0, 2000), st.floats(0.01, 1.0))
def test_lazy_disk_moves_instead_of_pushing_when_two_tasks_fit(
        specs: list[tuple[int, int, int]], budget: int, theta_d: float) -> None:
    groups = [GroupLoad(i, task, size, produced) for i, (task, size, produced) in
              enumerate(specs)]
    biggest = max((g.size for g in groups), default=0)
    if sum(g.size for g in groups) > 2 * budget - 2 * biggest:
        return
    plan = plan_adaptation(groups, 2, budget=budget, theta_d=theta_d)
    assert plan.pushes == ()
    assert max(after_moves(groups, plan, 2)) <= budget


def rate_ratio(groups: list[GroupLoad], rates: dict[int, float]) -> float:
    count = {t: sum(g.task == t for g in groups) for t in rates}
    average = [rates[t] / count[t] for t in rates if count[t]]
    if len(average) < 2:
        return 1.0
    return max(average) / min(average) if min(average) else (math.inf if max(average) else 1.0)


@PROFILE
@given(st.data(), loads())
def test_active_disk_pushes_only_when_balanced_and_rates_differ(
        data: st.DataObject, case: tuple[list[GroupLoad], int]) -> None:
    groups, tasks = case
    kwargs = data.draw(options(tasks))
    active = plan_adaptation(groups, tasks, policy="active-disk", **kwargs)
    lazy = plan_adaptation(groups, tasks, policy="lazy-disk", **kwargs)
    if (active.moves, active.pushes) == (lazy.moves, lazy.pushes):
        return
    memory = memory_per_task(groups, tasks)
    assert lazy.moves == lazy.pushes == ()
    assert active.moves == ()
    assert ratio(memory) >= kwargs["theta_d"]  # type: ignore[operator]
    assert rate_ratio(groups, kwargs["rates"]) > kwargs["theta_f"]  # type: ignore[arg-type]
    assert len({p.task for p in active.pushes}) <= 1


@PROFILE
@given(st.data(), loads(), st.sampled_from(["lazy-disk", "active-disk"]))
def test_apply_plan_keeps_every_group_assigned_once(
        data: st.DataObject, case: tuple[list[GroupLoad], int], policy: str) -> None:
    groups, tasks = case
    plan = plan_adaptation(groups, tasks, policy=policy, **data.draw(options(tasks)))
    after = apply_plan({g.group: g.task for g in groups}, plan)
    assert sorted(after) == sorted(g.group for g in groups)
    assert all(0 <= t < tasks for t in after.values())
    moved = {m.group: m.target for m in plan.moves}
    assert all(after[g.group] == moved.get(g.group, g.task) for g in groups)


# -- worked examples -----------------------------------------------------------------------

def test_imbalance_moves_the_most_productive_groups_about_half_the_gap() -> None:
    groups = [GroupLoad(0, 0, 40, 1), GroupLoad(1, 0, 30, 30), GroupLoad(2, 0, 30, 3),
              GroupLoad(3, 1, 20, 20)]
    plan = plan_adaptation(groups, 2)  # M = 100 / 20: gap 80, move ~40 B
    assert plan.moves == (Move(1, 0, 1, 30),)  # P_s/P_o 1 first; group 2 (10) would overshoot
    assert plan.pushes == ()
    assert "M_l/M_m = 20/100 = 0.200" in plan.reason


def test_balanced_memory_moves_nothing_and_no_state_plans_nothing() -> None:
    balanced = [GroupLoad(0, 0, 100, 1), GroupLoad(1, 1, 90, 1)]
    assert plan_adaptation(balanced, 2).moves == ()
    assert "balanced" in plan_adaptation(balanced, 2).reason
    empty = plan_adaptation([GroupLoad(0, 0, 0, 5)], 3)
    assert empty == Plan((), (), "no memory-resident state on 3 task(s)")
    assert plan_adaptation(balanced, 2, policy="none").moves == ()


def test_lazy_disk_moves_to_free_memory_before_pushing() -> None:
    # ratio 0.5 >= theta_d 0.4, but task 0 is over budget and task 1 has room
    groups = [GroupLoad(0, 0, 50, 10), GroupLoad(1, 0, 25, 50), GroupLoad(2, 0, 25, 1),
              GroupLoad(3, 1, 50, 5)]
    plan = plan_adaptation(groups, 2, theta_d=0.4, budget=90)
    assert plan.moves == (Move(1, 0, 1, 25),)
    assert plan.pushes == ()


def test_lazy_disk_pushes_least_productive_when_every_task_is_over_budget() -> None:
    groups = [GroupLoad(0, 0, 50, 10), GroupLoad(1, 0, 30, 0), GroupLoad(2, 0, 20, 20),
              GroupLoad(3, 1, 60, 60), GroupLoad(4, 1, 40, 1, spilled=True)]
    plan = plan_adaptation(groups, 2, budget=70, push_fraction=0.3)
    assert plan.moves == ()
    # task 0: 30% of 100 and the 30 B excess -> group 1 (P_o = 0); task 1: group 4 (40 B)
    assert plan.pushes == (Push(1, 0, 30), Push(4, 1, 40))


def test_lazy_disk_does_not_move_spilled_groups() -> None:
    groups = [GroupLoad(0, 0, 100, 100, spilled=True), GroupLoad(1, 1, 10, 1)]
    assert plan_adaptation(groups, 2).moves == ()


def test_active_disk_pushes_the_slow_tasks_unproductive_groups() -> None:
    groups = [GroupLoad(0, 0, 100, 400), GroupLoad(1, 0, 100, 400),
              GroupLoad(2, 1, 100, 100), GroupLoad(3, 1, 100, 10)]
    rates = {0: 800.0, 1: 110.0}  # per group 400 vs 55: ratio 7.3 > 2
    lazy = plan_adaptation(groups, 2, rates=rates)
    assert lazy.moves == lazy.pushes == ()
    active = plan_adaptation(groups, 2, policy="active-disk", rates=rates)
    assert active.pushes == (Push(3, 1, 100),)  # 30% of 200 B: the least productive group
    assert active.active
    assert not lazy.active
    assert "MaxRate/MinRate = 400/55" in active.reason
    capped = plan_adaptation(groups, 2, policy="active-disk", rates=rates, budget=200,
                             query_memory=420)
    assert capped.pushes == ()  # M_q - M_c = 420 - 400 = 20 < any group
    assert "at most 20 B left of M_q - M_c" in capped.reason
    def spent(pushed: int) -> tuple[Push, ...]:
        return plan_adaptation(groups, 2, policy="active-disk", rates=rates, budget=200,
                               query_memory=800, active_pushed=pushed).pushes

    assert spent(250) == (Push(3, 1, 100),)  # 800 - 400 - 250 = 150 B left
    assert spent(350) == ()  # 50 B left: no group fits

    slow = plan_adaptation(groups, 2, policy="active-disk", rates={0: 800.0, 1: 600.0})
    assert slow.pushes == ()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"policy": "lazy_disk"}, "did you mean 'lazy-disk'"),
    ({"theta_d": 0.0}, "theta_d must be in (0, 1]"),
    ({"theta_d": 1.5}, "got 1.5"),
    ({"theta_f": 0.5}, "theta_f must be >= 1"),
    ({"push_fraction": 0.0}, "push_fraction"),
    ({"budget": -1}, "budget must be >= 0"),
    ({"rates": {5: 1.0}}, "rate 1.0 of task 5"),
    ({"rates": {0: math.nan}}, "rate nan"),
])
def test_invalid_arguments_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("]", r"\]")):
        plan_adaptation([GroupLoad(0, 0, 1, 1)], 2, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("groups", "tasks", "message"), [
    ([GroupLoad(0, 0, 1, 1), GroupLoad(0, 1, 1, 1)], 2, "group 0 is listed twice"),
    ([GroupLoad(3, 0, -1, 1)], 2, "size=-1"),
    ([GroupLoad(3, 2, 1, 1)], 2, "on task 2, outside 0..1"),
    ([], 0, "tasks must be an integer >= 1, got 0"),
])
def test_invalid_loads_are_named(groups: list[GroupLoad], tasks: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_adaptation(groups, tasks)


def test_apply_plan_refuses_a_stale_plan() -> None:
    plan = Plan((Move(7, 0, 1, 5),), (), "")
    assert apply_plan({7: 0, 2: 1}, plan) == {2: 1, 7: 1}
    with pytest.raises(ValueError, match="group 7 from task 0: the group is on task 1"):
        apply_plan({7: 1}, plan)
