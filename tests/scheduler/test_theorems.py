"""Jiang & Chakravarthy (2003), Theorems 1 and 3 on random plans in the simulator (fluid model).

Each test generates exactly the setting the theorem's proof assumes, and says why.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.plan import (
    OperatorDef,
    OperatorKind,
    QueryPlan,
    build_segments,
    operator_paths,
)
from spark_stream_sched.runtime.plan.capacity import chain_service_time
from spark_stream_sched.runtime.plan.segments import progress_chart
from spark_stream_sched.runtime.scheduler import Simulator, get_strategy
from spark_stream_sched.runtime.scheduler.strategies import PathCapacityStrategy

from .plans import TENTHS, arrivals_for, join_trees, linear_paths

POWERS_OF_TWO = st.integers(0, 2).map(lambda a: 2.0**-a)


class StaticPathOrder(PathCapacityStrategy):
    """A path-based strategy with an arbitrary static priority per path."""

    name = "static_path_order"

    def __init__(self, ranks, **options):
        super().__init__(**options)
        self.ranks = ranks

    def priority(self, unit, view):
        return self.ranks[unit.index]


class RandomPath(PathCapacityStrategy):
    """A path-based strategy picking a random path with work at every decision (seeded)."""

    name = "random_path"

    def __init__(self, seed, **options):
        super().__init__(**options)
        self.seed = seed

    def reset(self):
        self.rng = random.Random(self.seed)

    def choose(self, candidates, view):
        return self.rng.choice(candidates)


@st.composite
def theorem_1_setting(draw):
    """k >= 2 disjoint linear paths with equal total selectivity, tuples waiting at time 0.

    Every path's selectivities multiply to the same ``s`` (powers of two, so exact), which
    makes each input tuple worth the same output mass; Theorem 1's exchange argument counts
    every tuple with weight 1, and the simulator measures latency on output tuples.
    """
    total = draw(st.sampled_from([0.25, 0.5, 1.0]))
    ops, arrivals = [], {}
    for p in range(draw(st.integers(2, 4))):
        sels = [draw(POWERS_OF_TWO) for _ in range(draw(st.integers(0, 2)))]
        sels.append(total / math.prod(sels))
        prev = f"s{p}"
        for j, sel in enumerate(sels):
            ops.append(OperatorDef(f"p{p}o{j}", OperatorKind.SELECT, (prev,), selectivity=sel,
                                   capacity=draw(TENTHS)))
            prev = f"p{p}o{j}"
        arrivals[f"s{p}"] = {0: draw(st.sampled_from([0.5, 1, 1.5, 2, 3]))}
    return QueryPlan(ops), arrivals


def drain(plan, arrivals, strategy):
    stats = plan.initial_stats()
    work = sum(
        float(arrivals[p.stream][0]) * chain_service_time(stats, p.operators)
        for p in operator_paths(plan)
    )
    sim = Simulator(plan, strategy, arrivals, exact=True)
    trace = sim.run(math.ceil(work) + 2)
    assert sim.network.total_size() == 0, "the run must drain every queue"
    return trace


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setting=theorem_1_setting(), seed=st.integers(0, 2**16),
       quantum=st.sampled_from([0.25, 0.5, 1.0, 2.0]))
def test_theorem_1_path_capacity_minimises_total_latency(setting, seed, quantum):
    """Theorem 1 (§3.1): path capacity has the least total tuple latency of path strategies.

    Setting of the proof: at one time instant (0) k paths hold ``N_i`` tuples each, no tuple
    arrives later, the paths share no operator, and only path-based strategies compete (every
    static path order, a random path per decision with preemptive and limited service, and
    exhaustive path capacity). Total latency = sum over output tuples of (output time - 0),
    compared exactly (fractions).
    """
    plan, arrivals = setting
    best = drain(plan, arrivals, get_strategy("path_capacity")).total_latency
    n = len(operator_paths(plan))
    rivals = [StaticPathOrder(dict(enumerate(r))) for r in itertools.permutations(range(n))]
    rivals += [RandomPath(seed), RandomPath(seed, service="limited", quantum=quantum)]
    rivals.append(get_strategy("path_capacity", service="exhaustive"))
    for rival in rivals:
        assert best <= drain(plan, arrivals, rival).total_latency


def envelope_segments(plan, stats):
    """Chain's lower-envelope segments of every path (steepest chord, then the longest)."""
    found = set()
    for path in operator_paths(plan):
        pts = progress_chart(plan, stats, path)
        i = 0
        while i < len(pts) - 1:
            slopes = [
                (pts[i][1] - pts[j][1]) / (pts[j][0] - pts[i][0]) for j in range(i + 1, len(pts))
            ]
            j = i + 1 + max(range(len(slopes)), key=lambda k: (slopes[k], k))
            found.add(path.operators[i:j])
            i = j
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(data=st.data(), with_joins=st.booleans())
def test_theorem_3_segment_needs_at_most_chains_memory(data, with_joins):
    """Jiang & Chakravarthy (2003), Theorem 3: segment scheduling's peak memory is at most Chain's.

    Setting of the proof: it identifies the segment with the biggest memory release capacity
    with Chain's steepest lower-envelope segment ("the operators along the segment S_i have the
    same biggest priority"), i.e. it assumes the §3.3 construction yields exactly Chain's
    segments. Plans are generated (disjoint select chains, or select chains joined by
    symmetric hash joins) and kept only when that holds; arrivals are arbitrary. Without the
    assumption the claim fails (e.g. capacities 1, 2.6, 2.2, 0.6 and selectivities 0.9, 0.3,
    0.3, 0.5 on one path: §3.3 cuts [1,2][3][4], Chain's envelope is [1,2,3][4]).
    """
    plan = data.draw(join_trees() if with_joins else linear_paths())
    stats = plan.initial_stats()
    assume({s.operators for s in build_segments(plan, stats)} == envelope_segments(plan, stats))
    arrivals = data.draw(arrivals_for(plan))
    peak = {
        name: Simulator(plan, get_strategy(name), arrivals, exact=True).run(40).peak_memory
        for name in ("segment", "chain")
    }
    assert peak["segment"] <= peak["chain"]


def test_theorem_3_needs_its_setting():
    """Outside the setting the claim fails: the counterexample named in the docstring above."""
    caps, sels = (1.0, 2.6, 2.2, 0.6), (0.9, 0.3, 0.3, 0.5)
    ops, prev = [], "s0"
    for j, (c, s) in enumerate(zip(caps, sels, strict=True)):
        ops.append(OperatorDef(f"o{j}", OperatorKind.SELECT, (prev,), selectivity=s, capacity=c))
        prev = f"o{j}"
    plan = QueryPlan(ops)
    stats = plan.initial_stats()
    assert {s.operators for s in build_segments(plan, stats)} == {
        ("o0", "o1"), ("o2",), ("o3",)}
    assert envelope_segments(plan, stats) == {("o0", "o1", "o2"), ("o3",)}
    arrivals = {"s0": {0: 1, 1: 1, 2: 1, 3: 1}}
    peak = {n: Simulator(plan, get_strategy(n), arrivals, exact=True).run(12).peak_memory
            for n in ("segment", "chain")}
    assert isinstance(peak["chain"], Fraction)
    assert peak["segment"] > peak["chain"]
