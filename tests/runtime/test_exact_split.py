"""Pane sums (two exact doubles, limbs as the fallback) give the rule's bits in any grouping.

Values are cut into batches (one :func:`.exact_split.pane_sums` call each, as the panes of
successive updates), the pane sums of a group are added as windows by a prefix sum (the dense
path's ``total``) or merged per group (the sparse path's ``totals``), and every result must equal
``math.fsum`` / ``fractions`` (:func:`~spark_stream_sched.testing.reference.float_sum`) and the
limbs of :mod:`.exact_partials` bit for bit.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime import exact_partials, exact_split
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE
from spark_stream_sched.runtime.exact_split import PANE_SUM_TYPE
from spark_stream_sched.testing.reference import float_sum

PROFILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
M = 1.7976931348623157e308  # the largest double

#: Any double, values near one another (the fast form) and the cases that break naive sums:
#: huge and tiny magnitudes, cancellation, subnormals, -0.0, NaN and infinities, nulls.
doubles = st.one_of(
    st.floats(), st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.floats(-1e-300, 1e-300),
    st.integers(-10**6, 10**6).map(lambda i: i / 1000),
    st.sampled_from([0.1, 0.2, 0.3, -0.0, 0.0, 1e16, -1e16, 1.0, M, -M, 1e308, -1e308,
                     5e-324, -5e-324, 2.0 ** -1022, 2.0 ** 970, 2.0 ** 1023, math.inf,
                     -math.inf, math.nan]))
#: Values within 30 binades of one another, as measurements are.
usual = st.one_of(st.floats(-1e3, 1e3).filter(lambda v: v == 0.0 or abs(v) >= 1e-6),
                  st.integers(-10**6, 10**6).map(lambda i: i / 1000))


def bits(value: float) -> str:
    """Hex form: equal strings are equal doubles (every NaN is "nan")."""
    return float(value).hex()


@st.composite
def batches(draw: st.DrawFn, values: st.SearchStrategy[float | None] = doubles) -> dict:
    """Values with a group and a batch each; ``pane`` = (batch, group) is one pane sum."""
    n = draw(st.integers(1, 60))
    return {"values": draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)),
            "group": draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
            "batch": draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)),
            "seed": draw(st.integers(0, 2 ** 32))}


def pane_table(case: dict) -> tuple[pa.ChunkedArray, np.ndarray]:
    """One pane-sum row per (batch, group) present, in a shuffled order; and its group."""
    values = pa.array(case["values"], pa.float64())
    group, batch = np.array(case["group"]), np.array(case["batch"])
    chunks, owners = [], []
    for b in np.unique(batch):
        rows = np.flatnonzero(batch == b)
        present = np.unique(group[rows])
        rank = np.searchsorted(present, group[rows])
        chunks.append(exact_split.pane_sums(values.take(pa.array(rows)), rank, len(present)))
        owners.append(present)
    column = pa.chunked_array(chunks, PANE_SUM_TYPE)
    order = random.Random(case["seed"]).sample(range(len(column)), len(column))
    return column.take(pa.array(order)), np.concatenate(owners)[order]


def oracle(case: dict) -> list[str]:
    """The rule per group 0..3 (a group without a non-null value sums to 0.0 here)."""
    return [bits(float_sum([v for v, g in zip(case["values"], case["group"], strict=True)
                            if g == k and v is not None])) for k in range(4)]


def prefix_total(group: np.ndarray) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """A dense-path ``total``: one cumulative sum over the pane rows sorted by group."""
    order = np.argsort(group, kind="stable")
    ends = np.searchsorted(group[order], np.arange(5))

    def total(per_row: np.ndarray) -> np.ndarray:
        prefix = np.concatenate([np.zeros(1, per_row.dtype), np.cumsum(per_row[order])])
        out: np.ndarray = prefix[ends[1:]] - prefix[ends[:-1]]
        return out
    return total, len(group)


@PROFILE
@given(case=batches())
def test_windows_of_pane_sums_equal_the_oracle(case: dict) -> None:
    """A prefix sum over any shuffled pane sums gives fsum's bits for every group."""
    column, group = pane_table(case)
    total, terms = prefix_total(group)
    assert [bits(x) for x in exact_split.window_sums(column, total, terms)] == oracle(case)


@PROFILE
@given(case=batches())
def test_merged_pane_sums_equal_the_oracle_and_the_limbs(case: dict) -> None:
    """``totals`` (the sparse path) equals the oracle and the exact partials' own totals."""
    column, group = pane_table(case)
    got, seen = exact_split.totals(column, group, 4)
    assert [bits(x) for x in got] == oracle(case)
    values = pa.array(case["values"], pa.float64())
    limbs, _ = exact_partials.totals(
        exact_partials.partials(values, np.array(case["group"]), 4), np.arange(4), 4)
    assert [bits(x) for x in got] == [bits(x) for x in limbs]
    has = {g for v, g in zip(case["values"], case["group"], strict=True) if v is not None}
    assert list(seen) == [k in has for k in range(4)]


@PROFILE
@given(case=batches(usual))
def test_usual_values_take_the_fast_form(case: dict) -> None:
    """Moderate values never touch the limbs, and still give the oracle's bits."""
    column, group = pane_table(case)
    assert all(c.field("rest").null_count == len(c) for c in column.chunks)
    total, terms = prefix_total(group)
    assert [bits(x) for x in exact_split.window_sums(column, total, terms)] == oracle(case)


@PROFILE
@given(case=batches(), rows=st.lists(st.integers(0, 1000), max_size=20))
def test_stored_pane_sums_load_back_to_the_same_sums(case: dict, rows: list[int]) -> None:
    """Snapshots keep exact partials; loaded back, the same pane sums merge to the same bits."""
    column, group = pane_table(case)
    table = pa.table({"g": pa.array(group), "s": column})
    stored = exact_split.stored(table)
    assert stored.schema.field("s").type == PARTIAL_TYPE
    loaded = exact_split.loaded(stored)
    assert loaded.schema.field("s").type == PANE_SUM_TYPE
    assert loaded.column("s").is_valid().equals(column.is_valid())
    pick = np.array([r % len(group) for r in rows], np.int64)
    before, _ = exact_split.totals(column, group[pick], 4, pick)
    after, _ = exact_split.totals(loaded.column("s"), group[pick], 4, pick)
    assert [bits(x) for x in after] == [bits(x) for x in before]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32), scale=st.sampled_from([1e-310, 1e-3, 1.0, 1e6, 1e300]),
       rows=st.sampled_from([1, 1000, 70_000, 300_000]), panes=st.integers(1, 4))
def test_many_rows_per_pane_stay_exact(seed: int, scale: float, rows: int, panes: int) -> None:
    """Hundreds of thousands of values per pane (the split leaves less headroom) and windows
    of several panes; cancellation (values of both signs) included."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(rows) * scale
    group = rng.integers(0, panes, rows)
    column = exact_split.pane_sums(pa.array(values), group, panes)
    total, terms = prefix_total(np.zeros(panes, np.int64))
    got = exact_split.window_sums(column, total, terms)[0]
    assert bits(got) == bits(float_sum(values.tolist()))


def test_exact_zeros_are_positive_zero_on_the_fast_form() -> None:
    column = exact_split.pane_sums(pa.array([-0.0, -0.0, 1.5, -1.5]), np.array([0, 0, 1, 1]), 2)
    total, terms = prefix_total(np.array([0, 1]))
    got = exact_split.window_sums(column, total, terms)
    assert [math.copysign(1.0, x) for x in got[:2]] == [1.0, 1.0]
    got, _ = exact_split.totals(column, np.array([0, 0]), 1)
    assert math.copysign(1.0, got[0]) == 1.0


def test_a_window_whose_panes_need_limbs_falls_back_to_them() -> None:
    """Pane sums of 1e16 and of 1.0 next to each other: float64 windows would lose the 1.0."""
    column = pa.chunked_array([exact_split.pane_sums(pa.array([1e16, 1e16]), np.array([0, 0]), 1),
                               exact_split.pane_sums(pa.array([1.0]), np.array([0]), 1),
                               exact_split.pane_sums(pa.array([-2e16]), np.array([0]), 1)])
    hi, _, grid, _, _ = exact_split._fields(column)
    assert not exact_split._exact(hi, grid, 3)
    total, terms = prefix_total(np.zeros(3, np.int64))
    assert exact_split.window_sums(column, total, terms)[0] == 1.0
