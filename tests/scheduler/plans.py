"""Hypothesis generators of plans and arrivals shared by the scheduler tests."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan

# Decimal numbers with short exact representations, so exact mode stays cheap.
TENTHS = st.integers(1, 30).map(lambda i: i / 10)
SELECTIVITY = st.integers(1, 10).map(lambda i: i / 10)
COUNTS = st.sampled_from([0, 0, 0, 0.5, 1, 2, 3])


def select(op_id: str, source: str, selectivity: float, capacity: float) -> OperatorDef:
    return OperatorDef(op_id, OperatorKind.SELECT, (source,), selectivity=selectivity,
                       capacity=capacity)


@st.composite
def linear_paths(draw, min_paths=1, max_paths=3, max_len=4):
    """Disjoint linear operator paths, path ``p`` reading stream ``s{p}``."""
    ops = []
    for p in range(draw(st.integers(min_paths, max_paths))):
        prev = f"s{p}"
        for j in range(draw(st.integers(1, max_len))):
            ops.append(select(f"p{p}o{j}", prev, draw(SELECTIVITY), draw(TENTHS)))
            prev = f"p{p}o{j}"
    return QueryPlan(ops)


@st.composite
def join_trees(draw):
    """Two or three select chains joined left-deep, then up to two more selects."""
    ops, tops = [], []
    for s in range(draw(st.integers(2, 3))):
        prev = f"s{s}"
        for j in range(draw(st.integers(1, 2))):
            ops.append(select(f"a{s}_{j}", prev, draw(SELECTIVITY), draw(TENTHS)))
            prev = f"a{s}_{j}"
        tops.append(prev)
    top = tops[0]
    for j, other in enumerate(tops[1:]):
        ops.append(OperatorDef(f"j{j}", OperatorKind.JOIN, (top, other),
                               selectivity=draw(SELECTIVITY), capacity=draw(TENTHS)))
        top = f"j{j}"
    for u in range(draw(st.integers(0, 2))):
        ops.append(select(f"u{u}", top, draw(SELECTIVITY), draw(TENTHS)))
        top = f"u{u}"
    return QueryPlan(ops)


@st.composite
def arrivals_for(draw, plan: QueryPlan, horizon: int = 12):
    """Integer-time arrivals of 0..3 tuples (halves allowed) per stream and time unit."""
    return {
        s: {t: c for t in range(horizon) if (c := draw(COUNTS))} for s in plan.streams
    }


def exact_selectivity_product(plan: QueryPlan, ops) -> Fraction:
    out = Fraction(1)
    for op in ops:
        out *= Fraction(repr(plan[op].selectivity))
    return out
