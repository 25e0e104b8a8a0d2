"""Window sums follow the one rule on every path: exactly rounded, whatever the panes."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.aggregates import bind, parse_aggregates
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.runtime.window import WindowAggregator, WindowSpec
from spark_stream_sched.runtime.window.panes import (
    combine_windows,
    expand_to_windows,
    pane_partials,
)
from spark_stream_sched.testing.reference import reference_aggregate

from .strategies import values_st

SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.string()), ("value", pa.float64())])
SUMS = "sum(value) as s, avg(value) as a, count(value) as n"


def windows(rows: list[tuple[int, float]], spec: WindowSpec, mode: str) -> list[dict]:
    table = pa.table({"ts": [t for t, _ in rows], "k": ["a"] * len(rows),
                      "value": [v for _, v in rows]}, schema=SCHEMA)
    op = WindowAggregator(spec, ["k"], SUMS, "ts", SCHEMA, mode=mode)
    return pa.concat_tables([op.update(table, None), op.finish()]).to_pylist()


@pytest.mark.parametrize("mode", ["auto", "dense", "sparse"])
def test_sliding_window_sum_is_fsum_not_a_sum_of_pane_sums(mode: str) -> None:
    """Window [0 s, 10 s) sliding by 5 s holds panes {0.3} and {0.2, 0.1}.

    Pane sums give 0.3 + (0.2 + 0.1) = 0.6000000000000001; the rule gives math.fsum, 0.6.
    """
    rows = [(1000, 0.3), (6000, 0.2), (7000, 0.1)]
    window = windows(rows, WindowSpec(10_000, 5_000), mode)[1]
    assert (window["window_start"], window["window_end"]) == (0, 10_000)
    assert window["s"] == math.fsum([0.3, 0.2, 0.1]) == 0.6
    assert window["a"] == 0.6 / 3


@pytest.mark.parametrize("mode", ["auto", "dense", "sparse"])
def test_window_sum_is_not_a_left_fold(mode: str) -> None:
    """0.1, 0.2, 0.3 folded left give 0.6000000000000001; 1e16 + 1 + 1 - 1e16 gives 0.0."""
    rows = [(1000, 0.1), (6000, 0.2), (7000, 0.3)]
    assert windows(rows, WindowSpec(10_000, 5_000), mode)[1]["s"] == 0.6
    rows = [(1000, 1e16), (1001, 1.0), (1002, 1.0), (1003, -1e16)]
    assert windows(rows, WindowSpec(10_000, 10_000), mode)[0]["s"] == 2.0


@st.composite
def one_stream(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 60))
    ts = sorted(draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n)))
    keys = draw(st.lists(st.sampled_from(["x", "y", None]), min_size=n, max_size=n))
    values = draw(st.lists(values_st, min_size=n, max_size=n))
    return pa.table({"ts": ts, "k": keys, "value": values}, schema=SCHEMA)


def bits(rows: list[dict]) -> list[dict]:
    return [{k: v.hex() if isinstance(v, float) else v for k, v in r.items()} for r in rows]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=one_stream(), size=st.sampled_from([2000, 3000, 5000]),
       slide=st.sampled_from([500, 1000]), seed=st.integers(0, 2 ** 32))
def test_pane_partials_of_any_row_grouping_combine_to_the_oracle(
        table: pa.Table, size: int, slide: int, seed: int) -> None:
    """Partials computed on arbitrary subsets of the rows (as tasks before a shuffle would),
    combined in a random order, give the oracle's bits."""
    spec, rng = WindowSpec(size, slide), random.Random(seed)
    aggs = [bind(a, SCHEMA) for a in parse_aggregates(SUMS)]
    owner = np.array([rng.randrange(3) for _ in range(table.num_rows)])
    parts = []
    for task in range(3):
        rows = table.filter(pa.array(owner == task))
        if rows.num_rows:
            pane = np.floor_divide(rows.column("ts").to_numpy(), spec.pane_ms)
            parts.append(pane_partials(rows, pane, ["k"], aggs))
    partials = pa.concat_tables(parts)
    partials = partials.take(pa.array(rng.sample(range(partials.num_rows), partials.num_rows)))
    k_first, k_last = spec.window_range_of_pane(partials.column("__pane").to_numpy())
    expanded = expand_to_windows(partials, k_first, k_last)
    got = combine_windows(expanded, ["k"], aggs, partials).to_pylist()
    for row in got:
        start = row.pop("__k") * slide
        row.update(window_start=start, window_end=start + size)
    want = reference_aggregate([table], spec, ["k"], SUMS)

    def order(r: dict) -> tuple:
        return r["window_start"], r["k"] is not None, r["k"] or ""
    assert bits(sorted(got, key=order)) == bits(sorted(want, key=order))


def _old_snapshot(op: WindowAggregator) -> bytes:
    """``op``'s snapshot as version 1 wrote it: no version, floating pane sums as float64."""
    meta, tables = snapshot.decode(op.snapshot(), "window")
    del meta["state_version"]
    if "panes" in tables:
        panes = tables["panes"]
        index = panes.schema.get_field_index("a0_sum")
        tables["panes"] = panes.set_column(index, "a0_sum", pa.array(
            [0.5] * panes.num_rows, pa.float64()))
    return snapshot.encode("window", meta, tables)


def test_a_snapshot_with_float_pane_sums_is_refused_with_what_to_do() -> None:
    table = pa.table({"ts": [0, 1000, 6000], "k": ["a"] * 3, "value": [0.1, 0.2, 0.3]},
                     schema=SCHEMA)
    op = WindowAggregator(WindowSpec(10_000, 5_000), ["k"], SUMS, "ts", SCHEMA)
    op.update(table, 5000)  # pane 0 complete, its window not closed: a partial in state
    with pytest.raises(StateError, match="restart it from a new checkpoint location"):
        WindowAggregator.restore(_old_snapshot(op))


def test_an_old_snapshot_without_pane_partials_still_loads() -> None:
    table = pa.table({"ts": [0, 1000], "k": ["a"] * 2, "value": [0.1, 0.2]}, schema=SCHEMA)
    op = WindowAggregator(WindowSpec(10_000, 5_000), ["k"], SUMS, "ts", SCHEMA)
    op.update(table, None)  # rows pending, no partial yet
    restored = WindowAggregator.restore(_old_snapshot(op))
    assert restored.finish().equals(op.finish())
