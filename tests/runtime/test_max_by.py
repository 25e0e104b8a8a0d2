"""``max_by(col, ord)`` / ``min_by(col, ord)``: Spark SQL's aggregates, ties by the total order.

The value of ``col`` on the row with the largest (smallest) ``ord``; of several such rows the
earliest in ``(ts, input, seq)``. Rows with a null order take no part; a chosen null value is
returned as null; ``-0.0`` equals ``0.0`` and NaN is above every number (Spark's ordering).
Window aggregates (both grid layouts, any batching, a snapshot in between) against the oracle,
with orders drawn to tie often; ``running()`` and sessions meet the same oracle in
``keyed/test_rows.py`` and ``test_properties.py``, whose aggregate lists include both.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ExpressionError
from spark_stream_sched.runtime.aggregates import bind, parse_aggregate
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from .keyed.test_rows import build
from .keyed.test_rows import table as keyed_table
from .strategies import sorted_times
from .test_properties import assert_rows_equal

AGGS = ["max_by(v, o) as mb", "min_by(v, o) as nb", "max_by(o, v) as mo", "min_by(s, o) as ns",
        "max_by(v, s) as mvs", "count(*) as n"]
SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.string()), ("v", pa.float64()),
                    ("o", pa.float64()), ("s", pa.string())])
ORDERS = st.one_of(st.none(), st.sampled_from([math.nan, -math.nan, -0.0, 0.0, 1.0, -1.0,
                                               math.inf, 2.5]))
PROFILE = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def tied_rows(draw: st.DrawFn) -> pa.Table:
    """Rows in the total order whose orders tie, are NaN, signed zeros or null."""
    n = draw(st.integers(0, 80))
    ts = sorted_times(draw, n, [0, 0, 1, 300, 1000])

    def col(strategy: st.SearchStrategy) -> list:  # noqa: ANN001
        return draw(st.lists(strategy, min_size=n, max_size=n))

    return pa.table({
        "ts": pa.array(ts, pa.int64()),
        "k": pa.array(col(st.sampled_from(["a", "b", None])), pa.string()),
        "v": pa.array(col(st.one_of(st.none(), st.floats(-5, 5, allow_nan=False))), pa.float64()),
        "o": pa.array(col(ORDERS), pa.float64()),
        "s": pa.array(col(st.one_of(st.none(), st.sampled_from(["x", "y", "xy"]))), pa.string()),
    }, schema=SCHEMA)


def _run(rows: pa.Table, cuts: list[int], mode: str, snapshot_at: int | None) -> pa.Table:
    spec = WindowSpec(1000, 500)
    agg = WindowAggregator(spec, ["k"], AGGS, "ts", SCHEMA, mode=mode)
    out, start = [], 0
    for i, cut in enumerate([*cuts, rows.num_rows]):
        part = rows.slice(start, cut - start)
        bound = rows.column("ts")[cut].as_py() if cut < rows.num_rows else None
        out.append(agg.update(part, bound))
        start = cut
        if snapshot_at == i:
            agg = WindowAggregator.restore(agg.snapshot())
    out.append(agg.finish())
    return pa.concat_tables(out)


def _cuts(draw: st.DrawFn, rows: pa.Table) -> list[int]:
    """Cut points where the next row's ts is a valid ready bound (all earlier rows given)."""
    ts = rows.column("ts").to_pylist()
    points = [i for i in range(1, len(ts)) if ts[i] > ts[i - 1]]
    return sorted(set(draw(st.lists(st.sampled_from(points), max_size=4)))) if points else []


@PROFILE
@given(data=st.data(), mode=st.sampled_from(["auto", "dense", "sparse"]))
def test_window_max_by_and_min_by_equal_the_oracle_for_any_batching(data: st.DataObject,
                                                                      mode: str) -> None:
    rows = data.draw(tied_rows())
    cuts = _cuts(data.draw, rows)
    snapshot_at = data.draw(st.one_of(st.none(), st.integers(0, len(cuts))))
    got = _run(rows, cuts, mode, snapshot_at).to_pylist()
    want = reference_aggregate([rows], WindowSpec(1000, 500), ["k"], AGGS)
    assert_rows_equal(got, want)


def test_running_max_by_takes_nan_as_the_largest_order_and_the_earliest_tie() -> None:
    rows = keyed_table([{"k": "a", "v": o, "i": j} for j, o in
                        enumerate([None, 0.0, -0.0, math.nan, 7.0, math.nan])])
    out = build("running(max_by(i, v) as hi, min_by(i, v) as lo)", ["k"]).update(rows, None)
    assert out.column("hi").to_pylist() == [None, 1, 1, 3, 3, 3]
    assert out.column("lo").to_pylist() == [None, 1, 1, 1, 1, 1]


def _window(rows: dict[str, list]) -> dict[str, object]:
    table = pa.table(rows, schema=SCHEMA)
    agg = WindowAggregator(WindowSpec(1000, 1000), [], AGGS, "ts", SCHEMA)
    out = pa.concat_tables([agg.update(table, None), agg.finish()]).to_pylist()
    assert len(out) == 1
    return out[0]


def test_nan_is_the_largest_order_and_signed_zeros_tie_to_the_earliest_row() -> None:
    row = _window({"ts": [0, 1, 2, 3], "k": ["a"] * 4, "v": [1.0, 2.0, 3.0, 4.0],
                   "o": [0.0, math.nan, -0.0, math.inf], "s": ["x"] * 4})
    assert row["mb"] == 2.0  # NaN is above inf
    assert row["nb"] == 1.0  # 0.0 and -0.0 tie: the earlier row
    assert row["ns"] == "x"


def test_null_orders_take_no_part_and_a_chosen_null_value_is_null() -> None:
    row = _window({"ts": [0, 1, 2], "k": ["a"] * 3, "v": [9.0, None, 1.0],
                   "o": [None, 5.0, 1.0], "s": [None, None, None]})
    assert row["mb"] is None  # the row with order 5 has a null value
    assert row["nb"] == 1.0  # the null order (value 9) is skipped
    assert row["mvs"] is None  # every order null: null


@pytest.mark.parametrize(("text", "message"), [
    ("max_by(v) as x", "needs two column names"),
    ("min_by(v, o, s) as x", "needs two column names"),
    ("max_by(, o) as x", "needs two column names"),
    ("max_by(v, f(o)) as x", "needs two column names"),
])
def test_a_malformed_max_by_names_the_fix(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        parse_aggregate(text)


def test_an_unknown_or_unorderable_order_column_is_refused_at_definition() -> None:
    schema = SCHEMA.append(pa.field("tags", pa.list_(pa.string())))
    with pytest.raises(ExpressionError, match="orders by unknown column 'nope'"):
        bind(parse_aggregate("max_by(v, nope) as x"), schema)
    with pytest.raises(ExpressionError, match="cannot order by 'tags'.*order by a number"):
        bind(parse_aggregate("min_by(v, tags) as x"), schema)


@pytest.mark.parametrize("text", ["max_by(`v`, o)", "min_by(v,`o`)", "sum(`v`)",
                                  "first_where(`v`, o > 1)"])
def test_the_canonical_text_parses_back_and_default_names_drop_backticks(text: str) -> None:
    spec = parse_aggregate(text)
    assert "`" not in spec.alias  # Spark names sum(`v`) "sum(v)"
    assert parse_aggregate(spec.text()) == spec  # a window snapshot re-parses this text
