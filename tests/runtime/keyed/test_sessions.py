"""``sessionize(gap)`` equals the per-tuple oracle for any input, cut, bound and restart."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime.keyed import build_operator, operator_names, parse_stage
from spark_stream_sched.runtime.keyed.sessions import Sessionize
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.testing.session_reference import reference_sessions

SCHEMA = pa.schema([("ts", pa.int64()), ("user", pa.string()), ("g", pa.int64()),
                    ("v", pa.float64()), ("i", pa.int64()), ("s", pa.string()),
                    (INPUT_COL, pa.int32()), (SEQ_COL, pa.int64())])
AGGREGATES = [
    "count(*) as n", "count(v) as nv", "sum(v) as sv", "sum(i) as si", "avg(v) as av",
    "avg(i) as ai", "min(v) as lo", "max(i) as hi", "min(s) as smin", "max(ts) as tmax",
    "first(v) as fv", "last(s) as ls", "first(i) as fi", "last(v) as lv",
    "count_where(s rlike '^[ab]') as cw", "first_where(i, v > 0.5) as fw",
    "last_where(s, s contains 'a' or v is null) as lw",
]
PROFILE = settings(max_examples=150, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def one_input(draw: st.DrawFn, index: int) -> list[dict[str, Any]]:
    """Rows of one input: non-decreasing ts with ties, skewed keys, nulls everywhere."""
    n = draw(st.integers(0, 50))
    t = draw(st.integers(-100, 100))
    rows = []
    for seq in range(n):
        t += draw(st.sampled_from([0, 0, 1, 2, 3, 5, 8, 13, 40]))
        rows.append({
            "ts": t, "user": draw(st.one_of(st.just("hot"), st.sampled_from(["u1", "u2", None]))),
            "g": draw(st.one_of(st.none(), st.integers(0, 1))),
            "v": draw(st.one_of(st.none(), st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from(
                [0.1, 0.2, 0.3, 1e16, -1e16, 1.0, 1e308, -1e308, 5e-324, float("inf")]),
                st.floats(allow_nan=False))),
            "i": draw(st.one_of(st.none(), st.integers(-10, 10))),
            "s": draw(st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "ca"]))),
            INPUT_COL: index, SEQ_COL: seq})
    return rows


@st.composite
def released(draw: st.DrawFn) -> pa.Table:
    """The merged, released rows of 1-3 inputs in the total order (ts, input, seq)."""
    rows = [r for j in range(draw(st.integers(1, 3))) for r in draw(one_input(j))]
    rows.sort(key=lambda r: (r["ts"], r[INPUT_COL], r[SEQ_COL]))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@st.composite
def calls(draw: st.DrawFn, ts: list[int]) -> list[tuple[int, int, int | None]]:
    """Cuts ``(lo, hi, bound)`` with valid, non-decreasing bounds (None where ties forbid one)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(ts)), max_size=6)))
    out: list[tuple[int, int, int | None]] = []
    lo, floor = 0, None
    for hi in cuts:
        low = ts[hi - 1] + 1 if hi else ts[0] - 20 if ts else 0
        high = ts[hi] if hi < len(ts) else low + 30
        bound = None
        if low <= high and draw(st.booleans()):
            bound = draw(st.integers(low, high))
            bound = bound if floor is None else max(floor, bound)
            floor = bound
        out.append((lo, hi, bound))
        lo = hi
    out.append((lo, len(ts), None))
    return out


def make(gap: int, keys: list[str], aggs: list[str], text: str = "") -> Sessionize:
    stage = parse_stage(text or f"sessionize({gap} milliseconds)")
    op = build_operator(stage, SCHEMA, keys, "ts", tuple(aggs))
    assert isinstance(op, Sessionize)
    return op


def exact(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with floats spelled in hex, so equality is bit-exact (sign of zero included)."""
    return [{k: (v.hex() if isinstance(v, float) else v) for k, v in r.items()} for r in rows]


@PROFILE
@given(released(), st.integers(1, 20), st.sampled_from([[], ["user"], ["user", "g"], ["g"]]),
       st.lists(st.sampled_from(AGGREGATES), max_size=7, unique=True), st.data())
def test_sessions_equal_oracle_for_any_cut_bound_and_restart(rows, gap, keys, aggs,
                                                              data) -> None:
    plan = data.draw(calls(rows.column("ts").to_pylist()))
    restart_after = data.draw(st.integers(0, len(plan)))
    text = data.draw(st.sampled_from([f"sessionize({gap} ms)", f"SESSIONIZE(gap='{gap}ms')"]))
    op = make(gap, keys, aggs, text)
    out = []
    for n, (lo, hi, bound) in enumerate(plan):
        got = op.update(rows.slice(lo, hi - lo), bound)
        ends = got.column("session_end").to_pylist()
        assert bound is not None or not ends
        assert all(end < bound for end in ends), (ends, bound)  # never before it is closed
        out.append(got)
        if n + 1 == restart_after:
            op = Sessionize.restore(op.snapshot())
    out.append(op.finish())
    result = pa.concat_tables(out)
    assert exact(result.to_pylist()) == exact(reference_sessions(rows, keys, gap, aggs))
    whole = make(gap, keys, aggs)
    one_call = pa.concat_tables([whole.update(rows, None), whole.finish()])
    assert exact(result.to_pylist()) == exact(one_call.to_pylist())  # NaN equals NaN here


def test_the_drawn_example() -> None:
    # gap = 5    ts:  1   3        9        14        20     (user a; 15 is user b)
    # session A:      [1 ...... 8)                          3 <= 1+5 extends A; 9 > 8 opens B
    # session B:                   [9 ...... 14 ..... 19)   14 == 9+5 still extends B
    # session C:                                      [20 ...... 25)
    ts = [1, 3, 9, 14, 15, 20]
    rows = pa.Table.from_pylist(
        [{"ts": t, "user": "b" if t == 15 else "a", INPUT_COL: 0, SEQ_COL: j}
         for j, t in enumerate(ts)], schema=SCHEMA)
    op = make(5, ["user"], ["count(*) as n"])
    assert op.update(rows.slice(0, 3), 8).num_rows == 0  # a tuple at ts 8 would still join A
    assert op.update(rows.slice(3, 0), 9).to_pylist() == [
        {"session_start": 1, "session_end": 8, "user": "a", "n": 2}]
    assert op.update(rows.slice(3), 21).to_pylist() == [
        {"session_start": 9, "session_end": 19, "user": "a", "n": 2},
        {"session_start": 15, "session_end": 20, "user": "b", "n": 1}]
    assert op.finish().to_pylist() == [
        {"session_start": 20, "session_end": 25, "user": "a", "n": 1}]


def test_timestamp_event_time_gives_millisecond_bounds() -> None:
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
    rows = pa.table({"ts": pa.array([1000, 2000, 9000_000], schema.field("ts").type),
                     "v": [1.0, 2.0, 3.0]}, schema=schema)
    op = build_operator(parse_stage("sessionize(1 second)"), schema, [], "ts", ("sum(v) as s",))
    assert op.update(rows, None).num_rows == 0
    assert op.finish().to_pylist() == [
        {"session_start": 1, "session_end": 1002, "s": 3.0},
        {"session_start": 9000, "session_end": 10000, "s": 3.0}]


def test_no_aggregates_gives_session_bounds_only() -> None:
    rows = pa.Table.from_pylist([{"ts": 5, INPUT_COL: 0, SEQ_COL: 0}], schema=SCHEMA)
    op = make(3, [], [])
    assert op.output_schema.names == ["session_start", "session_end"]
    assert op.update(rows, 9).to_pylist() == [{"session_start": 5, "session_end": 8}]
    assert op.finish().num_rows == 0


@pytest.mark.parametrize(("text", "needle"), [
    ("sessionize()", "exactly one argument"),
    ("sessionize(5)", "has no unit"),
    ("sessionize(0 seconds)", "must be positive"),
    ("sessionize(1 month)", "no fixed length"),
    ("sessionize(5 minutes, 1 minute)", "exactly one argument"),
    ("sessionize(width=5 minutes)", "is not a duration"),
])
def test_bad_gap_is_refused_naming_the_stage(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        make(1, [], [], text)
    assert "sessionize(" in str(info.value)


@pytest.mark.parametrize(("keys", "aggs", "needle"), [
    (["nope"], [], "'nope' is not in the input"),
    (["user"], ["sum(nope) as x"], "unknown column 'nope'"),
    (["user"], ["sum(s) as x"], "needs a numeric column"),
    (["user"], ["count(*) as session_end"], "clash"),
])
def test_unknown_columns_and_clashes_are_refused(keys: list[str], aggs: list[str],
                                                 needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        make(5, keys, aggs)


def test_registered_as_a_closing_operator() -> None:
    assert "sessionize" in operator_names()
    assert Sessionize.emits_rows is False
    stage = parse_stage("Sessionize( gap = 5 minutes )")
    assert (stage.name, stage.keyword("gap")) == ("sessionize", "5 minutes")
    assert make(1, [], [], stage.text()).gap_ms == 300_000


def test_contract_violations_are_input_errors() -> None:
    rows = pa.Table.from_pylist([{"ts": t, INPUT_COL: 0, SEQ_COL: t} for t in (1, 2)],
                                schema=SCHEMA)
    op = make(5, [], ["count(*) as n"])
    op.update(rows, 10)
    with pytest.raises(InputError, match="event-time order"):
        op.update(rows, 12)  # ts 1 < bound 10
    with pytest.raises(InputError, match="went back"):
        op.update(rows.slice(0, 0), 9)
    with pytest.raises(InputError, match="lack a column"):
        op.update(rows.drop_columns(["ts"]), 12)
    with pytest.raises(InputError, match="event-time order"):
        make(5, [], []).update(rows.take([1, 0]), None)


def test_corrupt_or_foreign_snapshots_are_state_errors() -> None:
    op = make(5, ["user"], ["count(*) as n"])
    op.update(pa.Table.from_pylist([{"ts": 1, "user": "a", INPUT_COL: 0, SEQ_COL: 0}],
                                   schema=SCHEMA), 2)
    data = bytearray(op.snapshot())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(StateError, match="checksum"):
        Sessionize.restore(bytes(data))
    with pytest.raises(StateError, match="expected 'keyed.sessionize'"):
        Sessionize.restore(snapshot.encode("window", {}, {}))
    with pytest.raises(StateError, match="does not hold valid state"):
        Sessionize.restore(snapshot.encode("keyed.sessionize", {"keys": []}, {}))
    restored = Sessionize.restore(op.snapshot())
    assert restored.finish().to_pylist() == [
        {"session_start": 1, "session_end": 6, "user": "a", "n": 1}]


def test_benchmark_implementations_agree() -> None:
    from spark_stream_sched.bench.keyed_sessions import run_sessions_bench

    results = run_sessions_bench(3000, 40, 1, 5, gap="2 minutes", packet_rows=256)
    assert [r["impl"] for r in results] == ["sessionize", "pandas", "loop"]
    assert all(r["equal_to_ours"] and r["tuples_per_s"] > 0 for r in results)
    assert 40 <= results[0]["sessions"] < 3000  # sessions of several clicks, and many of them
