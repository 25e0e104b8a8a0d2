"""Bursty self-similar arrivals and random multi-query plans (Jiang & Chakravarthy 2003, §5.1)."""

from __future__ import annotations

import numpy as np
import pytest

from spark_stream_sched.data.bursty import (
    as_arrivals,
    bursty_counts,
    on_fraction,
    random_plan,
)
from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.scheduler import Simulator, get_strategy


def test_same_seed_same_counts_and_different_seed_differs():
    a = bursty_counts({"s1": 4.0, "s2": 1.0}, 500, seed=7)
    b = bursty_counts({"s1": 4.0, "s2": 1.0}, 500, seed=7)
    c = bursty_counts({"s1": 4.0, "s2": 1.0}, 500, seed=8)
    assert all(np.array_equal(a[s], b[s]) for s in a)
    assert not np.array_equal(a["s1"], c["s1"])
    assert a["s1"].dtype == np.int64
    assert a["s1"].shape == (500,)


def test_on_fraction_of_pareto_periods():
    # mean ON = 1.4 / 0.4 = 3.5, mean OFF = 1.2 / 0.2 = 6
    assert on_fraction() == pytest.approx(3.5 / 9.5)


def test_counts_are_bursty_beyond_poisson():
    """Self-similarity: block means keep far more variance than a Poisson stream's (1/m)."""
    counts = bursty_counts({"s": 5.0}, 20_000, seed=1)["s"].astype(float)
    var1 = counts.var()
    blocks = counts.reshape(-1, 100).mean(axis=1)
    assert blocks.var() > 2 * var1 / 100  # about 3-4x here; a Poisson stream gives 1x
    assert 3.0 < counts.mean() < 8.0


def test_arrivals_feed_the_simulator():
    plan = random_plan(4, ["s1", "s2", "s3"], seed=3)
    counts = bursty_counts(dict.fromkeys(plan.streams, 1.0), 50, seed=2)
    arrivals = as_arrivals(counts)
    assert set(arrivals) == set(plan.streams)
    assert all(t >= 1 for per in arrivals.values() for t in per)
    trace = Simulator(plan, get_strategy("simplified_segment"), arrivals).run(60)
    assert len(trace.records) == 60
    assert sum(r.arrivals for r in trace.records) == sum(int(c.sum()) for c in counts.values())


def test_random_plan_shape():
    plan = random_plan(16, ["s1", "s2", "s3", "s4", "s5"], seed=11)
    kinds = {plan[op].kind.value for op in plan.operators}
    assert kinds <= {"select", "project", "join"}
    assert "join" in kinds
    assert len([op for op in plan.operators if plan.is_root(op)]) == 16
    again = random_plan(16, ["s1", "s2", "s3", "s4", "s5"], seed=11)
    assert [plan[o] for o in plan.operators] == [again[o] for o in again.operators]


def test_capacity_scale_multiplies_capacities():
    base = random_plan(3, ["s1", "s2"], seed=4)
    scaled = random_plan(3, ["s1", "s2"], seed=4, capacity_scale=100)
    assert [scaled[o].capacity for o in scaled.operators] == pytest.approx(
        [100 * base[o].capacity for o in base.operators], rel=1e-2)


def test_bad_arguments():
    with pytest.raises(ConfigError):
        bursty_counts({"s": -1.0}, 10, seed=0)
    with pytest.raises(ConfigError):
        random_plan(0, ["s"], seed=0)
