"""The distribution manager and its recorded assignments.

See Liu & Rundensteiner (2005), §5-§6; pure: no JVM.

The next batch's group -> task assignment is a function of the previous record and the previous
batch's recorded group metrics only: the same files always give the same assignment (any order
of the metrics files), lazy-disk never moves a spilled group, pushes apply only to a query whose
last stage is a join without a window, and a record survives a round trip byte for byte and
refuses corruption.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.distribution.assignments import Assignment
from spark_stream_sched.runtime.distribution.loads import can_spill
from spark_stream_sched.runtime.distribution.manager import (
    AdaptationConfig,
    adaptation_from_options,
    initial_groups,
    next_assignment,
)
from spark_stream_sched.runtime.query import spec_from_options

LAZY = AdaptationConfig("lazy-disk", budget=1000)


def parts_of(previous: Assignment, loads: dict[int, tuple[int, int, int]]) -> list[dict[str, Any]]:
    """Task metrics as ``read()`` writes them: each task reports the groups it ran."""
    return [{"task": t, "group_loads": {str(g): list(loads[g]) for g in previous.groups_of(t)}}
            for t in range(previous.tasks)]


def start(n_groups: int = 8, n_tasks: int = 2) -> Assignment:
    return Assignment("v0", n_tasks, initial_groups(n_groups, n_tasks))


@pytest.mark.parametrize(("options", "message"), [
    ({"adaptation": "lazy"}, r"option adaptation='lazy' is not one of none, lazy-disk, "
                             r"active-disk; did you mean 'lazy-disk'\?"),
    ({"adaptation": "lazy-disk", "thetaD": "1.5"}, r"option thetaD='1.5' must be in \(0, 1\]"),
    ({"adaptation": "lazy-disk", "thetaD": "0"}, r"option thetaD='0' must be in \(0, 1\]"),
    ({"adaptation": "active-disk", "thetaF": "0.5"}, r"option thetaF='0.5' must be at least 1"),
    ({"adaptation": "active-disk", "thetaF": "fast"}, r"option thetaF='fast' is not a number"),
    ({"stateMemoryBudget": "lots"}, r"option stateMemoryBudget: value 'lots' is not a size"),
    ({"stateMemoryBudget": "0"}, r"option stateMemoryBudget='0' must be a positive size"),
    ({"adaptation": "lazy-disk", "pushFraction": "0"}, r"option pushFraction='0' must be in "
                                                       r"\(0, 1\]"),
    ({"adaptation": "lazy-disk", "pushFraction": "1.2"}, r"option pushFraction='1.2' must be in"),
    ({"adaptation": "lazy-disk", "pushFraction": "half"}, r"option pushFraction='half' is not a "
                                                          r"number"),
])
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        adaptation_from_options(options)


def test_options_parse_into_a_config() -> None:
    config = adaptation_from_options({"adaptation": "Active-Disk", "thetaD": "0.9",
                                      "thetaF": "3", "stateMemoryBudget": "512m",
                                      "pushFraction": "0.5"})
    assert config == AdaptationConfig("active-disk", 0.9, 3.0, 512 << 20, 0.5)
    assert adaptation_from_options({}) == AdaptationConfig()
    assert not AdaptationConfig().enabled


def test_unbalanced_tasks_move_groups_and_produced_accumulates() -> None:
    previous = start()
    # task 0 holds 4 x 400 B, task 1 4 x 50 B: M_l / M_m = 0.125 < 0.8
    loads = {g: (400 if g < 4 else 50, 10 * g, 0) for g in range(8)}
    chosen = next_assignment("v1", previous, parts_of(previous, loads), 8, 2,
                             AdaptationConfig("lazy-disk"), spillable=True)
    assert chosen.moves
    assert all(m[1] == 0 and m[2] == 1 for m in chosen.moves)
    assert chosen.groups != previous.groups
    assert chosen.produced == tuple(10 * g for g in range(8))
    assert chosen.moved_bytes == sum(m[3] for m in chosen.moves) > 0
    again = next_assignment("v2", chosen, parts_of(chosen, loads), 8, 2,
                            AdaptationConfig("lazy-disk"), spillable=True)
    assert again.produced == tuple(20 * g for g in range(8))


def test_incomplete_metrics_keep_the_assignment() -> None:
    previous = Assignment("v0", 2, (1, 1, 0, 0), produced=(5, 5, 5, 5))
    parts = parts_of(previous, {g: (100, 1, 0) for g in range(4)})[:1]  # task 1's lost
    chosen = next_assignment("v1", previous, parts, 4, 2, LAZY, spillable=True)
    assert chosen.groups == previous.groups
    assert not chosen.moves
    assert not chosen.pushes
    assert chosen.produced == (5, 5, 5, 5)
    assert "incomplete" in chosen.reason


def test_pushes_only_for_a_query_that_can_spill() -> None:
    previous = start(4, 2)
    loads = {g: (900, 0 if g % 2 else 50, 0) for g in range(4)}  # both tasks over budget
    spilling = next_assignment("v1", previous, parts_of(previous, loads), 4, 2, LAZY, True)
    assert spilling.pushes
    windows = next_assignment("v1", previous, parts_of(previous, loads), 4, 2, LAZY, False)
    assert windows.pushes == ()
    assert "pushes skipped" in windows.reason
    join = {"keyColumns": "k", "operators": "join(3, within=5 seconds)"}
    assert can_spill(spec_from_options(join, 3))
    assert can_spill(spec_from_options({**join, "operators": "join(3); delta(v)"}, 3))
    assert can_spill(spec_from_options(
        {**join, "window": "10s", "aggregates": "count(*) as n"}, 3))
    assert not can_spill(spec_from_options(
        {"keyColumns": "k", "operators": "delta(v)", "window": "10s",
         "aggregates": "count(*) as n"}, 3))


def test_active_disk_pushes_at_most_m_q_minus_m_c() -> None:
    # Two tasks of two groups, 400 B each: balanced and under the 1000 B budget, but task 1
    # produced nothing (MaxRate/MinRate infinite). M_q = memory + bytes on disk; M_c = 2 x 1000.
    active = AdaptationConfig("active-disk", budget=1000)
    previous = start(4, 2)

    def plan(on_disk: int) -> Assignment:
        loads = {0: (400, 50, on_disk), 1: (400, 50, 0), 2: (400, 0, 0), 3: (400, 0, 0)}
        return next_assignment("v1", previous, parts_of(previous, loads), 4, 2, active, True)

    fits = plan(0)  # M_q = 1600 <= M_c: the cluster holds the query, nothing to push
    assert fits.pushes == ()
    assert "pushes 0 B" in fits.reason
    over = plan(900)  # M_q = 2500: at most 500 B may go, one 400 B group of the slow task
    assert len(over.pushes) == 1
    assert over.pushes[0] in (2, 3)
    assert "at most 500 B left of M_q - M_c" in over.reason
    assert over.active_pushed == 400


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 12), st.integers(1, 4), st.data())
def test_the_same_files_give_the_same_assignment_and_spilled_groups_stay(
        n_groups: int, n_tasks: int, data: st.DataObject) -> None:
    n_tasks = min(n_tasks, n_groups)
    groups = tuple(data.draw(st.lists(st.integers(0, n_tasks - 1), min_size=n_groups,
                                      max_size=n_groups)))
    previous = Assignment("v0", n_tasks, groups, produced=(0,) * n_groups)
    loads = {g: (data.draw(st.integers(0, 5000)), data.draw(st.integers(0, 50)),
                 data.draw(st.integers(0, 1))) for g in range(n_groups)}
    policy = data.draw(st.sampled_from(["lazy-disk", "active-disk"]))
    config = AdaptationConfig(policy, budget=data.draw(st.none() | st.integers(1, 20000)))
    parts = parts_of(previous, loads)
    chosen = next_assignment("v1", previous, parts, n_groups, n_tasks, config, True)
    shuffled = list(parts)
    random.Random(n_groups).shuffle(shuffled)
    assert next_assignment("v1", previous, shuffled, n_groups, n_tasks, config, True) == chosen
    assert all(0 <= t < n_tasks for t in chosen.groups)
    moved = {m[0] for m in chosen.moves}
    assert {g for g in range(n_groups) if chosen.groups[g] != groups[g]} == moved
    if policy == "lazy-disk":
        assert not any(loads[g][2] for g in moved), "lazy-disk moved a spilled group"
    assert len({m[1] for m in chosen.moves}) <= 1, "one sender per adaptation"


def test_record_round_trip_replay_and_corruption(tmp_path: Path) -> None:
    previous = start()
    loads = {g: (400 if g < 4 else 50, g, g % 2) for g in range(8)}
    chosen = next_assignment("000-b", previous, parts_of(previous, loads), 8, 2, LAZY, True)
    assignments.write_assignment(str(tmp_path), chosen)
    assert assignments.read_assignment(str(tmp_path), "000-b") == chosen
    assert assignments.read_assignment(str(tmp_path), "000-c") is None
    path = Path(assignments.record_path(str(tmp_path), "000-b"))
    path.write_text(path.read_text().replace('"tasks": 2', '"tasks": 3'))
    with pytest.raises(StateError, match=r"recorded group assignment .*000-b\.json is corrupt "
                                         r"\(truncated or damaged"):
        assignments.read_assignment(str(tmp_path), "000-b")


def test_prune_keeps_the_committed_record(tmp_path: Path) -> None:
    for version in ("000-a", "001-b", "002-c", "003-d"):
        assignments.write_assignment(str(tmp_path), Assignment(version, 1, (0,)))
    assert assignments.prune(str(tmp_path), "002-c", keep_older=1) == 1
    assert assignments.recorded_versions(str(tmp_path)) == ["001-b", "002-c", "003-d"]


def test_push_fraction_sets_how_much_an_over_budget_task_pushes() -> None:
    previous = start(n_groups=8, n_tasks=1)
    loads = {g: (400, 10 * (g + 1), 0) for g in range(8)}  # 3,200 B against a 3,000 B budget
    pushed = {}
    for fraction in (0.3, 0.9):
        config = AdaptationConfig("lazy-disk", budget=3000, push_fraction=fraction)
        chosen = next_assignment("v1", previous, parts_of(previous, loads), 8, 1, config,
                                 spillable=True)
        pushed[fraction] = len(chosen.pushes)
        assert 400 * len(chosen.pushes) >= fraction * 3200
    assert pushed[0.3] < pushed[0.9]
