"""Hypothesis strategies shared by the runtime property tests."""

from __future__ import annotations

import math

import pyarrow as pa
from hypothesis import strategies as st

from spark_stream_sched.runtime.window.spec import WindowSpec

SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.string()), ("g", pa.int64()),
                    ("v", pa.float64()), ("i", pa.int64()), ("s", pa.string())])

AGGREGATES = [
    "count(*) as n", "count(v) as nv", "sum(v) as sv", "sum(i) as si", "avg(v) as av",
    "avg(i) as ai", "min(v) as lo", "max(i) as hi", "min(s) as smin", "first(v) as fv",
    "last(s) as ls", "count_where(s rlike '^[ab]') as cw", "first_where(i, v > 0.5) as fw",
    "last_where(s, s contains 'a' or v is null) as lw", "first(i) as fi",
    "count_where(not (i < 3) and k is not null) as cw2",
    "max_by(s, v) as mbs", "min_by(i, s) as nbi", "max_by(v, i) as mbv",
]

keys_st = st.sampled_from(["k0", "k1", "k2", "k3", None])
#: Mostly moderate values; sometimes values whose sums cancel or round (0.1 + 0.2 + 0.3), span
#: the whole range or overflow (1e308), subnormals, infinities.
values_st = st.one_of(
    st.none(), st.floats(-1e3, 1e3, allow_nan=False), st.floats(-1e3, 1e3, allow_nan=False),
    st.sampled_from([0.1, 0.2, 0.3, -0.0, 1e16, -1e16, 1.0, 1e308, -1e308, 5e-324]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([math.inf, -math.inf]))
skewed_keys = st.one_of(st.just("hot"), keys_st)


def sorted_times(draw: st.DrawFn, n: int, gaps: list[int], start: int = 0) -> list[int]:
    """``n`` non-decreasing timestamps from ``start``, each the last plus one of ``gaps``."""
    ts, t = [], start
    for gap in draw(st.lists(st.sampled_from(gaps), min_size=n, max_size=n)):
        t += gap
        ts.append(t)
    return ts


@st.composite
def input_stream(draw: st.DrawFn, max_rows: int = 40) -> pa.Table:
    """One timestamp-sorted input with ties, nulls and skewed keys."""
    n = draw(st.integers(0, max_rows))
    start = draw(st.integers(-5_000, 20_000))
    ts = sorted_times(draw, n, [0, 0, 1, 7, 250, 999, 1000, 3000], start)

    def col(strategy: st.SearchStrategy) -> list:  # noqa: ANN001
        return draw(st.lists(strategy, min_size=n, max_size=n))
    return pa.table({
        "ts": pa.array(ts, pa.int64()),
        "k": pa.array(col(skewed_keys), pa.string()),
        "g": pa.array(col(st.integers(0, 2)), pa.int64()),
        "v": pa.array(col(values_st), pa.float64()),
        "i": pa.array(col(st.one_of(st.none(), st.integers(-10, 10))), pa.int64()),
        "s": pa.array(col(st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "ca", "zz"]))),
                      pa.string()),
    }, schema=SCHEMA)


windows_st = st.builds(
    lambda slide, factor, extra: WindowSpec(slide * factor + extra, slide),
    st.sampled_from([500, 1000, 3000]), st.integers(1, 4), st.sampled_from([0, 0, 250]))


def split_points(draw: st.DrawFn, n: int) -> list[int]:
    """Sorted cut positions for splitting ``n`` rows into batches."""
    return sorted(draw(st.lists(st.integers(0, n), max_size=4)))
