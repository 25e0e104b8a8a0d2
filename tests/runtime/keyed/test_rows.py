"""Row operators (running, delta, lag, dedup, where) equal the per-tuple oracle exactly.

The generators at the top are shared with ``test_user.py``: ``keyed_rows`` draws released rows
in the total order ``(ts, __input, __seq)`` with equal timestamps, skewed keys and nulls;
``chunking`` cuts them into update() calls with random ready bounds that respect the contract
(every later tuple has ``ts >= bound``) and picks a chunk boundary at which the operator is
snapshotted and restored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.keyed.base import KeyedOperator, build_operator
from spark_stream_sched.runtime.keyed.stage import parse_stage
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.state.snapshot import decode, encode
from spark_stream_sched.testing.keyed_reference import (
    reference_dedup,
    reference_delta,
    reference_lag,
    reference_running,
    reference_where,
)

PROFILE = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCHEMA = pa.schema([("ts", pa.int64()), (INPUT_COL, pa.int32()), (SEQ_COL, pa.int64()),
                    ("k", pa.string()), ("g", pa.int64()), ("v", pa.float64()),
                    ("i", pa.int64()), ("s", pa.string()), ("b", pa.bool_()),
                    ("t", pa.timestamp("ms"))])
KEYS = st.sampled_from([[], ["k"], ["k", "g"], ["g"]])

floats = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False),
                   st.sampled_from([0.1, 0.2, 0.3, -0.0, 0.0, 1e16, -1e16, 3.0]))


@st.composite
def keyed_rows(draw: st.DrawFn, max_rows: int = 60) -> pa.Table:
    """Rows in the total order with ties, nulls everywhere and a hot key."""
    n = draw(st.integers(0, max_rows))
    gaps = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 5, 40]), min_size=n, max_size=n))
    inputs = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    ts, t = [], draw(st.integers(-100, 100))
    for gap in gaps:
        t += gap
        ts.append(t)
    order = sorted(range(n), key=lambda j: (ts[j], inputs[j]))
    seq_of: dict[int, int] = {}
    seqs = []
    for j in order:
        seqs.append(seq_of.get(inputs[j], 0))
        seq_of[inputs[j]] = seqs[-1] + 1

    def col(strategy: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(strategy, min_size=n, max_size=n))

    return pa.table({
        "ts": pa.array([ts[j] for j in order], pa.int64()),
        INPUT_COL: pa.array([inputs[j] for j in order], pa.int32()),
        SEQ_COL: pa.array(seqs, pa.int64()),
        "k": col(st.one_of(st.just("hot"), st.sampled_from(["a", "b", "c", None]))),
        "g": col(st.one_of(st.none(), st.integers(0, 2))),
        "v": col(floats),
        "i": col(st.one_of(st.none(), st.integers(-10**6, 10**6))),
        "s": col(st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "zz"]))),
        "b": col(st.one_of(st.none(), st.booleans())),
        "t": pa.array(col(st.one_of(st.none(), st.integers(-10**9, 10**9))), pa.timestamp("ms")),
    }, schema=SCHEMA)


@st.composite
def chunking(draw: st.DrawFn, table: pa.Table) -> tuple[list[int], list[int | None], int]:
    """Cut points, one valid bound per chunk (the last may be +infinity) and a restore point."""
    n, ts = table.num_rows, table.column("ts").to_pylist()
    cuts = sorted(set(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=5)))) if n > 1 else []
    bounds: list[int | None] = []
    for cut in cuts:
        possible = ts[cut - 1] < ts[cut]
        bounds.append(draw(st.one_of(st.none(), st.integers(ts[cut - 1] + 1, ts[cut])))
                      if possible else None)
    bounds.append(draw(st.sampled_from([None, TS_MAX])))
    return cuts, bounds, draw(st.integers(0, len(cuts)))


def build(stage: str, keys: list[str], schema: pa.Schema = SCHEMA) -> KeyedOperator:
    """The operator of ``stage`` for ``schema`` keyed by ``keys``."""
    return build_operator(parse_stage(stage), schema, keys, "ts")


def run(make: Callable[[], KeyedOperator], table: pa.Table,
        plan: tuple[list[int], list[int | None], int]) -> pa.Table:
    """Feed ``table`` in chunks; snapshot and restore before chunk ``plan[2]``."""
    cuts, bounds, restore_at = plan
    op, outputs = make(), []
    edges = [0, *cuts, table.num_rows]
    for c, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
        if c == restore_at:
            op = type(op).restore(op.snapshot())
        outputs.append(op.update(table.slice(start, end - start), bounds[c]))
    outputs.append(op.finish())
    for out in outputs:
        assert out.schema.equals(op.output_schema)
    return pa.concat_tables(outputs)


def run_once(make: Callable[[], KeyedOperator], table: pa.Table) -> pa.Table:
    """Feed ``table`` in one update() call."""
    op = make()
    return pa.concat_tables([op.update(table, TS_MAX), op.finish()])


def exact(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with floats replaced by their hex form, so ``==`` compares them bit for bit."""
    return [{name: (value.hex() if isinstance(value, float) else value)
             for name, value in row.items()} for row in rows]


def assert_same(actual: pa.Table, expected: list[dict[str, Any]]) -> None:
    """``actual`` equals the oracle's rows exactly (column order, values, float bits)."""
    assert exact(actual.to_pylist()) == exact(expected)
    if expected:
        assert actual.column_names == list(expected[0])


# -- running --------------------------------------------------------------------------------

RUNNING = ["sum(v)", "sum(i) as si", "avg(v) as av", "avg(i)", "min(v)", "max(s) as ms",
           "min(b)", "max(t) as mt", "first(v) as fv", "last(s)", "count(*) as n",
           "count(v) as nv", "count_where(s = 'a') as cw", "first_where(i, v > 0) as fw",
           "last_where(s, i < 0 or v is null) as lw", "max(v) as mv", "min(i) as mi",
           "first(b)", "max_by(i, v) as mbi", "min_by(s, t) as nbs", "max_by(v, s) as mvs",
           "min_by(b, i) as nbb"]


@PROFILE
@given(keyed_rows(), KEYS, st.lists(st.sampled_from(RUNNING), min_size=1, max_size=6,
                                    unique=True), st.data())
def test_running_equals_reference(rows, keys, aggregates, data) -> None:
    def make() -> KeyedOperator:
        return build(f"running({', '.join(aggregates)})", keys)
    expected = reference_running(rows, keys, aggregates)
    assert_same(run(make, rows, data.draw(chunking(rows))), expected)
    assert_same(run_once(make, rows), expected)


def test_running_float_sum_is_exactly_rounded() -> None:
    values = (1e16, 1.0, 1.0, -1e16, 0.1, 0.2)
    rows = table([{"k": "a", "v": v} for v in values])
    out = build("running(sum(v)) as total", ["k"]).update(rows, None)
    got = out.column("total").to_pylist()
    assert [x.hex() for x in got] == [math.fsum(values[:j + 1]).hex() for j in range(6)]
    # A left fold would give 1e16, 1e16, 1e16, 0.0, 0.1, 0.30000000000000004.
    assert got == [1e16, 1e16, 1.0000000000000002e16, 2.0, 2.1, 2.3]


def test_running_min_max_order_nan_above_numbers_and_skip_nulls() -> None:
    rows = table([{"k": "a", "v": v} for v in (None, 2.0, math.nan, -1.0, None)])
    out = build("running(min(v) as lo, max(v) as hi, sum(v) as sv)", ["k"]).update(rows, None)
    assert out.column("lo").to_pylist()[:2] == [None, 2.0]
    assert out.column("lo").to_pylist()[2:] == [2.0, -1.0, -1.0]
    hi = out.column("hi").to_pylist()
    assert hi[:2] == [None, 2.0]
    assert all(math.isnan(x) for x in hi[2:])
    assert out.column("sv").to_pylist()[0] is None


# -- delta and lag --------------------------------------------------------------------------

@PROFILE
@given(keyed_rows(), KEYS, st.sampled_from(["v", "i", "t"]), st.data())
def test_delta_equals_reference(rows, keys, col, data) -> None:
    def make() -> KeyedOperator:
        return build(f"delta({col})", keys)
    expected = reference_delta(rows, keys, col)
    assert_same(run(make, rows, data.draw(chunking(rows))), expected)
    assert_same(run_once(make, rows), expected)


@PROFILE
@given(keyed_rows(), KEYS, st.sampled_from(["v", "s", "t", "b"]), st.integers(1, 4), st.data())
def test_lag_equals_reference(rows, keys, col, n, data) -> None:
    def make() -> KeyedOperator:
        return build(f"lag({col}, {n}) as prev", keys)
    expected = reference_lag(rows, keys, col, n, "prev")
    assert_same(run(make, rows, data.draw(chunking(rows))), expected)
    assert_same(run_once(make, rows), expected)


def test_delta_of_timestamps_is_milliseconds_and_null_sides_give_null() -> None:
    rows = table([{"k": "a", "t": t} for t in (1000, 1500, None, 4000)])
    out = build("delta(t) as dt", ["k"]).update(rows, None)
    assert out.schema.field("dt").type == pa.int64()
    assert out.column("dt").to_pylist() == [None, 500, None, None]


# -- dedup and where ------------------------------------------------------------------------

@PROFILE
@given(keyed_rows(), KEYS, st.sampled_from([["s"], ["s", "b"], ["v"], ["i"]]),
       st.sampled_from(["1ms", "3 milliseconds", "40ms", "1 second"]), st.data())
def test_dedup_equals_reference_and_purges_state(rows, keys, cols, within, data) -> None:
    stage = f"dedup({', '.join(cols)}, within={within})"
    within_ms = parse_duration(within)
    expected = reference_dedup(rows, keys, cols, within_ms)
    assert_same(run(lambda: build(stage, keys), rows, data.draw(chunking(rows))), expected)
    assert_same(run_once(lambda: build(stage, keys), rows), expected)
    cuts, bounds, _ = data.draw(chunking(rows))
    op, edges = build(stage, keys), [0, *cuts, rows.num_rows]
    for (start, end), bound in zip(zip(edges, edges[1:], strict=False), bounds, strict=True):
        op.update(rows.slice(start, end - start), bound)
        kept = op.state_tables()["dedup"].column("kept_ts").to_pylist()
        if bound is not None:
            assert all(t + within_ms > bound for t in kept)
    if bounds[-1] == TS_MAX:
        assert op.state_tables()["dedup"].num_rows == 0


#: (as written in the stage, the predicate it means)
WHERE = [("v > 0", "v > 0"), ("s == 'a' or i is null", "s == 'a' or i is null"),
         ("\"s = 'ab'\"", "s = 'ab'"), ("i = 3 or s = 'a'", "i = 3 or s = 'a'"),
         ("not b", "not b"), ("k rlike 'h'", "k rlike 'h'")]


@PROFILE
@given(keyed_rows(), st.sampled_from(WHERE), st.data())
def test_where_equals_reference(rows, where, data) -> None:
    written, predicate = where
    expected = reference_where(rows, predicate)
    assert_same(run(lambda: build(f"where({written})", ["k"]), rows,
                    data.draw(chunking(rows))), expected)


def test_dedup_reanchors_after_the_horizon() -> None:
    rows = table([{"k": "a", "s": "x", "ts": t} for t in (0, 5, 10, 12, 19, 20, 25)])
    out = build("dedup(s, within=10ms)", ["k"]).update(rows, None)
    assert out.column("ts").to_pylist() == [0, 10, 20]


# -- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("stage", "message"), [
    ("delta(nope)", "unknown column 'nope'"),
    ("delta(s)", "not numeric"),
    ("delta(v, i)", "expected one column"),
    ("lag(v, 0)", "integer >= 1"),
    ("lag(v, two)", "integer >= 1"),
    ("lag(nope, 1)", "unknown column 'nope'"),
    ("dedup(s)", "'within' is required"),
    ("dedup(within=1s)", "at least one column"),
    ("dedup(s, within=10)", "has no unit"),
    ("dedup(s, within=ten minutes)", "is not a duration"),
    ("dedup(s, within=1s, gap=2s)", "only the keyword 'within'"),
    ("dedup(nope, within=1s)", "unknown column 'nope'"),
    ("running(sum(s))", "needs a numeric column"),
    ("running(sum(nope))", "unknown column 'nope'"),
    ("running(sum(v), count(*)) as x", "names a single aggregate"),
    ("running(count(*) as v)", "already exists"),
    ("where(v > 'a')", "compares a number with a string"),
    ("where(nope == 1)", "unknown column 'nope'"),
    ("where(v > 0, within=1s)", "no keyword"),
])
def test_bad_arguments_name_the_stage(stage, message) -> None:
    with pytest.raises(ConfigError) as info:
        build(stage, ["k"])
    text = str(info.value)
    assert f"operator {parse_stage(stage).text()!r}" in text
    assert message in text


@pytest.mark.parametrize("stage", ["running(sum(v), first(s))", "delta(v)", "lag(s, 2)",
                                   "dedup(s, within=1s)", "where(v > 0)"])
def test_corrupt_or_foreign_snapshot_is_a_state_error(stage) -> None:
    op = build(stage, ["k"])
    op.update(table([{"k": "a", "v": 1.0, "s": "x"}]), None)
    data = op.snapshot()
    restored = type(op).restore(data)
    assert restored.snapshot() == data
    corrupt = data[:40] + bytes([data[40] ^ 1]) + data[41:]
    with pytest.raises(StateError, match="checksum"):
        type(op).restore(corrupt)
    with pytest.raises(StateError, match="truncated|bad magic|checksum"):
        type(op).restore(data[:-10])
    other = build("delta(i)" if stage.startswith("running") else "running(count(*))", ["k"])
    with pytest.raises(StateError, match="holds"):
        type(op).restore(other.snapshot())


def test_a_running_float_sum_kept_as_float64_is_refused_with_what_to_do() -> None:
    """Snapshots written before exact sums kept ``s0`` as float64: no later row can be added to
    that exactly, so the restore names the layout and the way out."""
    op = build("running(sum(v))", ["k"])
    op.update(table([{"k": "a", "v": 0.1}]), None)
    meta, tables = decode(op.snapshot(), "keyed.running")
    state = tables["running"]
    tables["running"] = state.set_column(state.schema.get_field_index("s0"), "s0",
                                         pa.array([0.1], pa.float64()))
    with pytest.raises(StateError, match="another layout.*new checkpoint location"):
        type(op).restore(encode("keyed.running", meta, tables))


def test_empty_update_keeps_state_and_schema() -> None:
    op = build("running(count(*) as n)", ["k"])
    empty = op.update(SCHEMA.empty_table(), 5)
    assert empty.num_rows == 0
    assert empty.schema.equals(op.output_schema)
    assert op.update(table([{"k": "a"}]), None).column("n").to_pylist() == [1]


def table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows in the total order from partial dicts (ts defaults to the position)."""
    full = [{**dict.fromkeys(SCHEMA.names), "ts": j, INPUT_COL: 0, SEQ_COL: j, **row}
            for j, row in enumerate(rows)]
    return pa.Table.from_pylist(full, schema=SCHEMA)
