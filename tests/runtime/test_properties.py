"""Property tests: the runtime equals the reference oracle for any input, split and schedule."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.testing.reference import merged_rows, reference_aggregate

from .strategies import AGGREGATES, SCHEMA, input_stream, windows_st

PROFILE = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def scenario(draw: st.DrawFn) -> dict:
    n_inputs = draw(st.integers(1, 4))
    inputs = [draw(input_stream()) for _ in range(n_inputs)]
    if draw(st.booleans()):  # sometimes one huge input next to small ones
        inputs[0] = draw(input_stream(max_rows=300))
    # A schedule of pushes (input, rows) and polls, then finishes in a random order.
    cursors = [0] * n_inputs
    actions: list[tuple] = []
    for _ in range(draw(st.integers(0, 30))):
        i = draw(st.integers(0, n_inputs - 1))
        take = draw(st.integers(0, 60))
        actions.append(("push", i, cursors[i], min(inputs[i].num_rows, cursors[i] + take)))
        cursors[i] = min(inputs[i].num_rows, cursors[i] + take)
        if draw(st.booleans()):
            actions.append(("poll",))
    for i in draw(st.permutations(range(n_inputs))):
        actions.append(("push", i, cursors[i], inputs[i].num_rows))
        actions.append(("finish", i))
        actions.append(("poll",))
    return {"inputs": inputs, "actions": actions}


def run_query(inputs: list[pa.Table], actions: list[tuple], make) -> pa.Table:  # noqa: ANN001
    query = make()
    out: list[pa.Table] = []
    for action in actions:
        _apply(query, inputs, action, out)
    return pa.concat_tables(out)


#: Float min/max aliases of AGGREGATES: which of 0.0 and -0.0 they return is not settled (the
#: dense and sparse paths may differ), so their zeros compare equal; every other float, sums and
#: averages included, compares bit for bit.
_EXTREMES = {"lo"}


def _bits(value: object, name: str = "") -> object:
    """A value with floats as their hex form (NaN as "nan"), so ``==`` compares bit for bit."""
    if not isinstance(value, float):
        return value
    return "zero" if name in _EXTREMES and value == 0 else value.hex()


def assert_rows_equal(actual: list[dict], expected: list[dict]) -> None:
    """Equal rows; floats (sums and averages included) equal bit for bit."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got.keys() == want.keys()
        for name, value in want.items():
            assert _bits(got[name], name) == _bits(value, name), (name, got, want)


def assert_identical(actual: pa.Table, expected: pa.Table) -> None:
    """Same schema and rows, floats bit for bit (``Table.equals`` fails on NaN == NaN)."""
    assert actual.schema.equals(expected.schema)
    assert_rows_equal(actual.to_pylist(), expected.to_pylist())


@PROFILE
@given(scenario(), windows_st, st.sampled_from([[], ["k"], ["k", "g"], ["g"]]),
       st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=6, unique=True))
def test_window_aggregation_equals_reference(sc, window, keys, aggs) -> None:
    def make() -> OrderedAggregation:
        return OrderedAggregation(len(sc["inputs"]), window, keys, aggs, "ts", "fail", SCHEMA)
    result = run_query(sc["inputs"], sc["actions"], make)
    expected = reference_aggregate(sc["inputs"], window, keys, aggs)
    assert_rows_equal(result.to_pylist(), expected)


@PROFILE
@given(scenario(), st.data())
def test_any_two_batchings_are_bit_identical(sc, data) -> None:
    inputs, window = sc["inputs"], data.draw(windows_st)
    # A second schedule: each input pushed in equal steps of a drawn size, then finished.
    actions_b = []
    for i in range(len(inputs)):
        step = max(1, data.draw(st.integers(1, 50)))
        for start in range(0, inputs[i].num_rows, step):
            actions_b += [("push", i, start, min(inputs[i].num_rows, start + step)), ("poll",)]
    actions_b += [x for i in range(len(inputs)) for x in (("finish", i), ("poll",))]

    def make() -> OrderedAggregation:
        return OrderedAggregation(len(inputs), window, ["k"], AGGREGATES, "ts", "fail", SCHEMA)
    first = run_query(inputs, sc["actions"], make)
    second = run_query(inputs, actions_b, make)
    assert_identical(first, second)  # floating sums included


@PROFILE
@given(scenario(), windows_st, st.integers(0, 200))
def test_snapshot_restore_continues_identically(sc, window, cut) -> None:
    inputs, actions = sc["inputs"], sc["actions"]
    cut = min(cut, len(actions))

    def make() -> OrderedAggregation:
        return OrderedAggregation(len(inputs), window, ["k"], AGGREGATES, "ts", "fail", SCHEMA)
    uninterrupted = run_query(inputs, actions, make)
    first = make()
    out = []
    for action in actions[:cut]:
        _apply(first, inputs, action, out)
    resumed = OrderedAggregation.restore(first.snapshot())
    for action in actions[cut:]:
        _apply(resumed, inputs, action, out)
    assert_identical(pa.concat_tables([uninterrupted.schema.empty_table(), *out]), uninterrupted)


def _apply(query, inputs, action, out) -> None:  # noqa: ANN001
    if action[0] == "push":
        query.push(action[1], inputs[action[1]].slice(action[2], action[3] - action[2]))
    elif action[0] == "finish":
        query.finish(action[1])
    else:
        out.append(query.poll())


@PROFILE
@given(scenario())
def test_merge_releases_total_order_and_only_ready_tuples(sc) -> None:
    inputs = sc["inputs"]
    merge = SMerge(len(inputs), "ts")
    released = []
    for action in sc["actions"]:
        if action[0] == "push":
            merge.push(action[1], inputs[action[1]].slice(action[2], action[3] - action[2]))
        elif action[0] == "finish":
            merge.finish(action[1])
        else:
            bound = merge.ready_bound
            rows = merge.pop_ready()
            if rows.num_rows and not merge.all_finished:
                assert bound is not None
                assert max(rows.column("ts").to_pylist()) < bound
            released.append(rows)
    got = [(r["ts"], r[INPUT_COL], r[SEQ_COL]) for t in released for r in t.to_pylist()]
    want = [(r["__ts"], r["__input"], r["__seq"]) for r in merged_rows(inputs, "ts")]
    assert got == want
    assert merge.buffered == 0


@PROFILE
@given(scenario(), windows_st, st.sampled_from([[], ["k"], ["k", "g"]]),
       st.lists(st.sampled_from([a for a in AGGREGATES if "min(s)" not in a]), min_size=1,
                max_size=8, unique=True))
def test_dense_and_sparse_paths_are_bit_identical(sc, window, keys, aggs) -> None:
    """Both stage-1 and stage-2 implementations give the same bits (floats included)."""
    def make(mode: str):  # noqa: ANN202
        def build() -> OrderedAggregation:
            query = OrderedAggregation(len(sc["inputs"]), window, keys, aggs, "ts", "fail",
                                       SCHEMA)
            query.window = WindowAggregator(window, keys, aggs, "ts", SCHEMA, mode=mode)
            return query
        return build
    dense = run_query(sc["inputs"], sc["actions"], make("dense"))
    sparse = run_query(sc["inputs"], sc["actions"], make("sparse"))
    assert_identical(dense, sparse)
    assert_rows_equal(dense.to_pylist(), reference_aggregate(sc["inputs"], window, keys, aggs))
