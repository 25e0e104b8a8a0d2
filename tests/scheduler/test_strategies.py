"""Strategies: registry, contract over every strategy, starvation, service, heuristics."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan, QueueId
from spark_stream_sched.runtime.scheduler import (
    QueueSnapshot,
    Simulator,
    get_strategy,
    strategy_names,
)
from spark_stream_sched.runtime.scheduler.strategies import strategy_options

from .plans import arrivals_for, exact_selectivity_product, join_trees, linear_paths

ALL = {name: {} for name in strategy_names()} | {"threshold": {"memory_limit": 5.0}}


def test_registry_names():
    assert set(strategy_names()) == {
        "fifo", "round_robin", "chain", "path_capacity", "segment", "simplified_segment",
        "threshold", "qst", "lp", "et", "ct",
    }
    assert get_strategy("Path-Capacity").name == "path_capacity"
    assert get_strategy("simplified_segment").gamma == 0.75
    threshold = get_strategy("threshold", memory_limit=10)
    assert (threshold.alpha, threshold.beta) == (0.9, 0.9)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("chian", {}, "unknown strategy 'chian'; did you mean 'chain'"),
        ("path_capacty", {}, "did you mean 'path_capacity'"),
        ("segment", {"gama": 0.5}, "no option 'gama'; valid: service, quantum"),
        ("simplified_segment", {"gama": 0.5}, "did you mean 'gamma'"),
        ("simplified_segment", {"gamma": 0}, "gamma must be in"),
        ("threshold", {}, "memory_limit"),
        ("threshold", {"memory_limit": 5, "beta": 0.4}, "beta must be in"),
        ("fifo", {"starvation": "dynamic"}, "needs a capacity priority"),
        ("chain", {"service": "exhausted"}, "did you mean 'exhaustive'"),
        ("lp", {"quantum": 0}, "quantum"),
        ("ct", {"window": -1}, "window must be > 0"),
    ],
)
def test_registry_errors(name, params, message):
    with pytest.raises(ConfigError, match=message):
        get_strategy(name, **params)


def test_options_are_listed():
    assert strategy_options("threshold")[:4] == ("memory_limit", "alpha", "beta", "gamma")
    assert "starvation_period" in strategy_options("fifo")


def test_unbound_strategy_says_how_to_fix():
    with pytest.raises(ConfigError, match="bind"):
        get_strategy("chain").decide(QueueSnapshot(0.0, {}))


def drain_steps(plan, arrivals):
    stats = plan.initial_stats()
    work = sum(float(c) for per in arrivals.values() for c in per.values())
    slowest = max(stats[op].cost for op in plan.operators)
    biggest = max(1.0, max(stats[op].selectivity for op in plan.operators))
    return 12 + int(work * slowest * len(plan.operators) * biggest ** len(plan.operators))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(ALL)))
def test_every_strategy_conserves_tuples_and_drains(data, name):
    """Contract: whatever the order, a linear plan outputs input * prod(selectivities) exactly."""
    plan = data.draw(linear_paths(max_paths=2, max_len=3))
    arrivals = data.draw(arrivals_for(plan, horizon=6))
    sim = Simulator(plan, get_strategy(name, **ALL[name]), arrivals, exact=True)
    trace = sim.run(drain_steps(plan, arrivals))
    assert sim.network.total_size() == 0
    expected = 0
    for stream, per_time in arrivals.items():
        ops = [stream]
        while plan.consumers(ops[-1]):
            ops.append(plan.consumers(ops[-1])[0])
        inputs = sum(Fraction(repr(c)) for c in per_time.values())
        expected += inputs * exact_selectivity_product(plan, ops[1:])
    assert trace.total_output == expected


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(ALL)),
       starvation=st.sampled_from(["none", "oldest"]))
def test_same_inputs_give_identical_traces(data, name, starvation):
    """Determinism: re-running (a fresh strategy object or the same one re-bound) is identical."""
    plan = data.draw(join_trees())
    arrivals = data.draw(arrivals_for(plan))
    params = dict(ALL[name], starvation=starvation, starvation_period=3)
    first = Simulator(plan, get_strategy(name, **params), arrivals).run(30)
    reused = get_strategy(name, **params)
    Simulator(plan, reused, arrivals).run(7)
    assert Simulator(plan, get_strategy(name, **params), arrivals).run(30) == first
    assert Simulator(plan, reused, arrivals).run(30) == first


def two_paths():
    """Path a: capacity 2 (fast); path b: capacity 0.5 (slow)."""
    return QueryPlan([
        OperatorDef("a", OperatorKind.SELECT, ("sa",), selectivity=1, capacity=2),
        OperatorDef("b", OperatorKind.SELECT, ("sb",), selectivity=1, capacity=0.5),
    ])


def snapshot(now, **queues):
    """``queues``: name -> (size, oldest arrival time)."""
    sizes = {QueueId(f"s{k}", k): v[0] for k, v in queues.items()}
    oldest = {QueueId(f"s{k}", k): v[1] for k, v in queues.items()}
    return QueueSnapshot(now, sizes, oldest)


def test_path_capacity_starves_slow_path_without_starvation_avoidance():
    strategy = get_strategy("path_capacity").bind(two_paths())
    view = snapshot(100.0, a=(5, 99.0), b=(1, 0.0))
    assert strategy.decide(view).unit.operators == ("a",)


def test_dynamic_priority_serves_the_old_path():
    """§4.2: C * tau * Q: slow path b (C=.5) with the oldest tuple and the bigger queue wins."""
    strategy = get_strategy("path_capacity", starvation="dynamic").bind(two_paths())
    assert strategy.decide(snapshot(100.0, a=(1, 99.0), b=(5, 0.0))).unit.operators == ("b",)
    strategy = get_strategy("path_capacity", starvation="dynamic").bind(two_paths())
    assert strategy.decide(snapshot(100.0, a=(5, 10.0), b=(5, 0.0))).unit.operators == ("a",)


def test_periodic_oldest_first():
    strategy = get_strategy("path_capacity", starvation="oldest", starvation_period=3)
    strategy.bind(two_paths())
    view = snapshot(100.0, a=(5, 99.0), b=(1, 0.0))
    chosen = []
    for _ in range(6):
        decision = strategy.decide(view)
        chosen.append((decision.unit.operators[0], decision.reason))
        strategy.release(decision, 0.0, 1.0)
    assert chosen == [("a", "priority"), ("a", "priority"), ("b", "starvation")] * 2


def test_service_disciplines():
    view = snapshot(1.0, a=(5, 0.0), b=(5, 0.0))
    pre = get_strategy("path_capacity").bind(two_paths()).decide(view)
    assert (pre.max_time, pre.preemptible) == (1.0, True)
    lim = get_strategy("path_capacity", service="limited", quantum=2.5, quantum_tuples=3)
    d = lim.bind(two_paths()).decide(view)
    assert (d.max_time, d.max_tuples, d.preemptible) == (2.5, 3, False)
    exh = get_strategy("path_capacity", service="exhaustive").bind(two_paths())
    first = exh.decide(snapshot(1.0, b=(5, 0.0)))
    exh.release(first, 1.0, 1.0)
    again = exh.decide(view)  # a now has work and a bigger capacity, but b is not empty yet
    assert (first.max_time, again.unit.operators, again.reason) == (None, ("b",), "exhaustive")


def test_exhaustive_simulation_finishes_the_slow_path_first():
    plan = two_paths()
    arrivals = {"sb": {0: 2}, "sa": {1: 4}}
    pre = Simulator(plan, get_strategy("path_capacity"), arrivals).run(6)
    exh = Simulator(plan, get_strategy("path_capacity", service="exhaustive"), arrivals).run(6)
    assert pre.records[1].units == ("path a",)  # preempted at the arrival on sa
    assert exh.records[1].units == ("path b",)


def test_threshold_formula_3_3_and_mode_switch():
    strategy = get_strategy("threshold", memory_limit=10.0).bind(two_paths())
    t_max, t_min = strategy.thresholds()  # alpha = .9: min(9.5, 9), min(9, 8.1)
    assert (t_max, t_min) == (pytest.approx(9.0), pytest.approx(8.1))
    assert strategy.decide(snapshot(1.0, a=(4, 0.0), b=(4, 0.0))).unit.kind.value == "path"
    assert strategy.decide(snapshot(2.0, a=(5, 0.0), b=(4, 0.0))).unit.kind.value == "segment"
    assert strategy.saving_mode
    assert strategy.decide(snapshot(3.0, a=(4.5, 0.0), b=(4, 0.0))).unit.kind.value == "segment"
    assert strategy.decide(snapshot(4.0, a=(4, 0.0), b=(4, 0.0))).unit.kind.value == "path"
    learned = get_strategy("threshold", memory_limit=10.0, alpha=None).bind(two_paths())
    for now, size in enumerate([2, 4, 6]):
        learned.decide(snapshot(float(now), a=(size, 0.0)))
    # mean M = 4, alpha = .4: T_max = min(7, 9) = 7, T_min = min(4, 6.3) = 4
    assert learned.thresholds() == (pytest.approx(7.0), pytest.approx(4.0))


def pipeline():
    """Prasaad et al. (2018) style pipeline: src -> o0 (sel .5) -> o1 (sel 2) -> o2 (stateful)."""
    return QueryPlan([
        OperatorDef("o0", OperatorKind.MAP, ("src",), selectivity=0.5, cost=1.0),
        OperatorDef("o1", OperatorKind.MAP, ("o0",), selectivity=2.0, cost=0.5),
        OperatorDef("o2", OperatorKind.WINDOW_AGGREGATE, ("o1",), selectivity=1.0, cost=2.0),
    ])


def pipe_view(q0, q1, q2):
    sizes = {QueueId("src", "o0"): q0, QueueId("o0", "o1"): q1, QueueId("o1", "o2"): q2}
    return QueueSnapshot(1.0, {k: v for k, v in sizes.items() if v})


def test_qst_eq_1_throttles_by_cumulative_selectivity():
    # cs = .5, 1, 1 -> T = C * cs / 2.5 = 20, 40, 40 with C = 100
    qst = get_strategy("qst").bind(pipeline())
    assert [qst.threshold(op) for op in ("o0", "o1", "o2")] == pytest.approx([20, 40, 40])
    assert qst.decide(pipe_view(10, 19, 5)).unit.operators == ("o0",)
    qst = get_strategy("qst").bind(pipeline())
    assert qst.decide(pipe_view(10, 21, 5)).unit.operators == ("o1",)
    qst = get_strategy("qst").bind(pipeline())
    assert qst.decide(pipe_view(10, 21, 41)).unit.operators == ("o2",)  # all throttled


def test_lp_et_ct():
    assert get_strategy("lp").bind(pipeline()).decide(pipe_view(10, 5, 1)).unit.operators == (
        "o2",)
    lp = get_strategy("lp", min_worklist=3).bind(pipeline())
    assert lp.decide(pipe_view(10, 5, 1)).unit.operators == ("o1",)
    # ET eq 2: I * c / (w + 1) = 10, 2.5, 2
    assert get_strategy("et").bind(pipeline()).decide(pipe_view(10, 5, 1)).unit.operators == (
        "o0",)
    ct = get_strategy("ct", window=100).bind(pipeline())
    first = ct.decide(pipe_view(10, 5, 1))
    ct.release(first, 1.0, 5.0)
    # n = (T + w s) / (c cs): o0 = 5/(1*.5) = 10, o1 = 0, o2 = 0 -> o1 (older index first)
    assert ct.decide(pipe_view(10, 5, 1)).unit.operators == ("o1",)


def test_worker_limits_follow_max_parallelism():
    """Prasaad et al. (2018), §6: a stateful operator runs on one worker at a time."""
    et = get_strategy("et").bind(pipeline())
    view = pipe_view(0, 0, 5)
    first = et.decide(view)
    assert first.unit.operators == ("o2",)
    assert et.decide(view) is None  # o2 is busy, nothing else has work
    et.release(first, 1.0, 1.0)
    assert et.decide(view).unit.operators == ("o2",)
    view0 = pipe_view(5, 0, 0)
    assert et.decide(view0).unit.operators == ("o0",)
    assert et.decide(view0).unit.operators == ("o0",)  # stateless: a second worker joins
