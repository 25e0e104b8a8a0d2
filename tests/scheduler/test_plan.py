"""Plans: loading, structure, paths, segments, statistics and capacities.

See Jiang & Chakravarthy (2003), §2-§3.
"""

from __future__ import annotations

import json

import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan import (
    OperatorDef,
    OperatorKind,
    OperatorStats,
    QueryPlan,
    QueueId,
    build_segments,
    chain_priorities,
    load_plan,
    operator_memory_release_capacity,
    operator_paths,
    path_memory_release_capacity,
    path_processing_capacity,
    plan_from_dict,
    segment_memory_release_capacity,
)
from spark_stream_sched.runtime.plan.segments import cut_path

from .test_table2 import CONF

TOML_PLAN = """
name = "select-join"
[[operators]]
id = "1"
inputs = ["s1"]
selectivity = 0.2
capacity = 1

[[operators]]
id = "2"
inputs = ["s2"]
selectivity = 0.2
capacity = 1

[[operators]]
id = "3"
kind = "join"
inputs = ["1", "2"]
selectivity = 0.8
capacity = 0.2

[[operators]]
id = "out"
kind = "sink"
inputs = ["3"]
"""


@pytest.fixture
def example():
    return load_plan(CONF / "example_2_2_plan.json")


def test_json_and_toml_give_the_same_plan(tmp_path, example):
    path = tmp_path / "plan.toml"
    path.write_text(TOML_PLAN)
    plan = load_plan(path)
    assert plan.operators == example.operators == ("1", "2", "3")
    assert plan.streams == ("s1", "s2")
    assert plan.queues == example.queues
    assert plan["out"].kind is OperatorKind.SINK  # defined, never scheduled
    assert plan.is_root("3")
    assert not plan.is_operator("out")
    assert plan["3"].kind is OperatorKind.JOIN
    assert plan["1"].kind is OperatorKind.SELECT


def test_structure(example):
    assert example.consumers("s1") == ("1",)
    assert example.output_queues("1") == (QueueId("1", "3"),)
    assert example.input_queues("3") == (QueueId("1", "3"), QueueId("2", "3"))
    assert dict(example.depth) == {"1": 0, "2": 0, "3": 1}
    paths = operator_paths(example)
    assert [(p.stream, p.operators) for p in paths] == [("s1", ("1", "3")), ("s2", ("2", "3"))]
    assert paths[0].queues == (QueueId("s1", "1"), QueueId("1", "3"))


def test_capacities_of_table_1(example):
    """Eqs 2.1-2.3 and 3.2 on Table 1 (tuple sizes 1; root output consumed at once)."""
    stats = example.initial_stats()
    assert operator_memory_release_capacity(example, stats, "1") == pytest.approx(0.8)  # 1(1-.2)
    assert operator_memory_release_capacity(example, stats, "3") == pytest.approx(0.2)  # .2(1-0)
    # eq 2.2: 1 / (1/1 + 0.2/0.2) = 0.5; eq 2.3: times input tuple size 1
    assert path_processing_capacity(stats, ("1", "3")) == pytest.approx(0.5)
    assert path_memory_release_capacity(stats, ("1", "3")) == pytest.approx(0.5)
    assert segment_memory_release_capacity(example, stats, ("1", "3")) == pytest.approx(0.5)
    assert segment_memory_release_capacity(example, stats, ("1",)) == pytest.approx(0.8)
    assert chain_priorities(example, stats) == pytest.approx({"1": 0.8, "2": 0.8, "3": 0.2})


def test_segments_of_table_1_and_pruning(example):
    stats = example.initial_stats()
    segs = build_segments(example, stats)
    assert [(s.operators, s.input_queues) for s in segs] == [
        (("1",), (QueueId("s1", "1"),)),
        (("3",), (QueueId("1", "3"), QueueId("2", "3"))),  # shared by both paths
        (("2",), (QueueId("s2", "2"),)),
    ]


def chain(*spec):
    ops, prev = [], "s"
    for i, (cap, sel) in enumerate(spec):
        ops.append(OperatorDef(f"o{i}", OperatorKind.SELECT, (prev,), selectivity=sel,
                               capacity=cap))
        prev = f"o{i}"
    return QueryPlan(ops)


def test_segment_construction_uses_non_decreasing_release_capacity():
    # C^M: o0 = 1*(1-.9) = .1, o1 = 2*(1-.5) = 1, o2 = 4*(1-.5) = 2, o3 = 1*(1-.5) = .5,
    # o4 = 2 (root: output size 0)
    plan = chain((1, 0.9), (2, 0.5), (4, 0.5), (1, 0.5), (2, 0.5))
    stats = plan.initial_stats()
    path = operator_paths(plan)[0]
    assert cut_path(plan, stats, path, 1.0, None) == [("o0", "o1", "o2"), ("o3", "o4")]
    # simplified (gamma 3/4, two segments at most): o3/o2 = .25 < .75 cuts, rest is one segment
    assert cut_path(plan, stats, path, 0.75, 2) == [("o0", "o1", "o2"), ("o3", "o4")]
    plan2 = chain((4, 0.5), (3.5, 0.5), (1, 0.9), (2, 0.5))  # C^M 2, 1.75, .1, 2
    path2 = operator_paths(plan2)[0]
    stats2 = plan2.initial_stats()
    assert cut_path(plan2, stats2, path2, 1.0, None) == [("o0",), ("o1",), ("o2", "o3")]
    assert cut_path(plan2, stats2, path2, 0.75, 2) == [("o0", "o1"), ("o2", "o3")]


def test_pruning_keeps_supersets_and_serves_every_queue():
    """§3.3 pruning: a subset of a listed segment is dropped, its entry queue moves over.

    C^M: a = .5, j = 2, u = 8 (path s1: one segment a>j>u); b = 5 > j (path s2: [b], [j>u]).
    """
    ops = [
        OperatorDef("a", OperatorKind.SELECT, ("s1",), selectivity=0.5, capacity=1),
        OperatorDef("b", OperatorKind.SELECT, ("s2",), selectivity=0.5, capacity=10),
        OperatorDef("j", OperatorKind.JOIN, ("a", "b"), selectivity=0.5, capacity=4),
        OperatorDef("u", OperatorKind.SELECT, ("j",), selectivity=0.5, capacity=8),
    ]
    plan = QueryPlan(ops)
    segs = build_segments(plan, plan.initial_stats())
    assert [s.operators for s in segs] == [("a", "j", "u"), ("b",)]
    assert segs[0].input_queues == (QueueId("s1", "a"), QueueId("b", "j"))
    served = {q for s in segs for q in s.input_queues}
    for s in segs:
        served.update(zip(s.operators, s.operators[1:], strict=False))
    assert served == set(plan.queues)


def test_stats_learned_from_measurements():
    s = OperatorStats(cost=1.0, selectivity=1.0)
    s.record(tuples_in=100, tuples_out=20, elapsed=0.5, bytes_in=800, bytes_out=100)
    assert (s.cost, s.selectivity, s.capacity) == (0.005, 0.2, 200.0)
    assert (s.input_tuple_size, s.output_tuple_size) == (8.0, 5.0)
    s.record(tuples_in=100, tuples_out=60, elapsed=1.5)
    assert (s.cost, s.selectivity, s.version) == (0.01, 0.4, 2)
    s.record(tuples_in=0, tuples_out=0, elapsed=1.0)  # nothing to learn
    assert s.version == 2


def test_stats_exponential_moving_average():
    s = OperatorStats(smoothing=0.5)
    s.record(10, 10, 1.0)
    s.record(10, 0, 3.0)
    assert s.cost == pytest.approx(0.2)
    assert s.selectivity == pytest.approx(0.5)


def test_capacities_follow_learned_stats(example):
    stats = example.initial_stats()
    version = stats.version
    stats["3"].record(tuples_in=10, tuples_out=8, elapsed=10)  # capacity 1 instead of 0.2
    assert stats.version != version
    assert path_processing_capacity(stats, ("1", "3")) == pytest.approx(1 / (1 + 0.2))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"operators": []}, "non-empty 'operators'"),
        (
            {"operators": [{"id": "a", "inputs": ["s"], "selectivty": 1}]},
            "did you mean 'selectivity'",
        ),
        ({"operatrs": []}, "did you mean 'operators'"),
        ({"operators": [{"id": "a", "inputs": ["s"], "kind": "selekt"}]}, "unknown operator kind"),
        ({"operators": [{"id": "a", "inputs": ["b"]}, {"id": "b", "inputs": ["a"]}]}, "cycle"),
        ({"operators": [{"id": "a", "inputs": ["s"]}, {"id": "a", "inputs": ["s"]}]}, "twice"),
        ({"operators": [{"id": "a", "inputs": ["s"], "capacity": 0}]}, "capacity must be > 0"),
        ({"operators": [{"id": "a", "inputs": ["s"], "capacity": "1"}]}, "must be a number"),
        ({"operators": [{"id": "a", "inputs": ["s"], "cost": 1, "capacity": 1}]}, "not both"),
        ({"operators": [{"id": "a", "inputs": []}]}, "no inputs"),
    ],
)
def test_bad_plans_raise_config_error(doc, message):
    with pytest.raises(ConfigError, match=message):
        plan_from_dict(doc)


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid json"):
        load_plan(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_plan(tmp_path / "missing.toml")
    arr = tmp_path / "list.json"
    arr.write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigError, match="top level"):
        load_plan(arr)
