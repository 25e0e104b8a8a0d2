"""S-Merge examples: readiness with ties, blocking inputs, out-of-order policies, snapshots."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, InputError, OutOfOrderError, StateError
from spark_stream_sched.runtime.merge import SMerge, total_order
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.state import snapshot


def t(*ts: int) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64()), "x": pa.array(range(len(ts)), pa.int64())})


def ids(table: pa.Table) -> list[tuple[int, int, int]]:
    return list(zip(table.column("ts").to_pylist(), table.column(INPUT_COL).to_pylist(),
                    table.column(SEQ_COL).to_pylist(), strict=True))


def test_input_that_sent_nothing_blocks_everything() -> None:
    merge = SMerge(2)
    merge.push(0, t(1, 2, 3))
    assert merge.ready_bound is None
    assert merge.pop_ready().num_rows == 0


def test_equal_timestamps_wait_for_the_strict_bound() -> None:
    #   input 0: 5 5        input 1: 5 ...  R = 5, so no ts=5 tuple is ready yet:
    #   input 0 may still send another 5 that must precede input 1's 5.
    merge = SMerge(2)
    merge.push(0, t(3, 5))
    merge.push(1, t(5))
    assert merge.ready_bound == 5
    assert ids(merge.pop_ready()) == [(3, 0, 0)]
    merge.push(0, t(5, 9))
    merge.push(1, t(7))
    assert ids(merge.pop_ready()) == [(5, 0, 1), (5, 0, 2), (5, 1, 0)]
    merge.finish(1)
    assert merge.ready_bound == 9
    assert ids(merge.pop_ready()) == [(7, 1, 1)]
    merge.finish(0)
    assert merge.ready_bound == TS_MAX
    assert ids(merge.pop_ready()) == [(9, 0, 3)]


def test_finished_input_counts_as_infinity() -> None:
    merge = SMerge(2)
    merge.finish(1)
    merge.push(0, t(1, 4))
    assert ids(merge.pop_ready()) == [(1, 0, 0)]


def test_out_of_order_fail_names_input_position_and_both_timestamps() -> None:
    merge = SMerge(2)
    merge.push(1, t(10, 20))
    with pytest.raises(OutOfOrderError) as info:
        merge.push(1, t(30, 15))
    message = str(info.value)
    assert "input 1" in message
    assert "position 3" in message
    assert "ts 15" in message
    assert "previous ts 30" in message


def test_out_of_order_drop_counts_and_keeps_positions() -> None:
    merge = SMerge(1, out_of_order="drop")
    merge.push(0, t(10, 5, 20, 19, 20))
    merge.finish(0)
    assert ids(merge.pop_ready()) == [(10, 0, 0), (20, 0, 2), (20, 0, 4)]
    assert merge.dropped == [2]


def test_a_schema_mismatch_is_one_line_with_the_reason_and_the_fix_first() -> None:
    """pyarrow's schema (a line per field) used to come first, the reason and the fix after."""
    merge = SMerge(2)
    merge.push(0, pa.table({"ts": pa.array([1], pa.int64()), "v": [1.0]}))
    with pytest.raises(InputError) as info:
        merge.push(1, pa.table({"ts": pa.array([1], pa.int64()), "v": ["x"]}))
    assert str(info.value) == (
        "input 1 does not match the first input's schema: Failed to parse string: 'x' as a "
        "scalar of type double; give every input the same columns and types; input 1 has "
        "(ts int64, v string), the first (ts int64, v double)")


def test_bad_inputs_give_clear_errors() -> None:
    merge = SMerge(1)
    with pytest.raises(InputError, match="timestamp column 'ts' not found"):
        merge.push(0, pa.table({"time": [1]}))
    with pytest.raises(InputError, match="null at row 1"):
        merge.push(0, pa.table({"ts": pa.array([1, None], pa.int64())}))
    with pytest.raises(InputError, match="type string"):
        merge.push(0, pa.table({"ts": ["1"]}))
    with pytest.raises(InputError, match="out of range"):
        merge.push(3, t(1))
    with pytest.raises(ConfigError, match="out-of-order policy"):
        SMerge(1, out_of_order="sort")


def test_timestamp_columns_are_converted_to_milliseconds() -> None:
    merge = SMerge(1)
    merge.push(0, pa.table({"ts": pa.array([1_500_000, 2_000_000], pa.timestamp("us"))}))
    merge.finish(0)
    assert merge.pop_ready().num_rows == 2
    assert merge.ready_bound == TS_MAX


def test_snapshot_round_trip_and_corruption_is_detected() -> None:
    merge = SMerge(2)
    merge.push(0, t(1, 2, 8))
    merge.push(1, t(3))
    data = merge.snapshot()
    restored = SMerge.restore(data)
    assert ids(restored.pop_ready()) == ids(merge.pop_ready())
    corrupted = bytearray(data)
    corrupted[len(data) // 2] ^= 0xFF
    with pytest.raises(StateError, match="checksum"):
        SMerge.restore(bytes(corrupted))
    with pytest.raises(StateError, match="truncated|too short|checksum"):
        SMerge.restore(data[: len(data) // 3])
    other_kind = snapshot.encode("window", {}, {})
    with pytest.raises(StateError, match="expected 'smerge'"):
        SMerge.restore(other_kind)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 5),
                          st.integers(0, 2)), max_size=40),
       st.sampled_from(["any", "grouped", "runs", "runs in sequence"]))
def test_total_order_equals_the_three_key_lexsort(rows: list[tuple[int, int, int, int]],
                                                  layout: str) -> None:
    """Every path equals lexsort: rows grouped by input in sequence order (one run), several
    such runs (a group's pending rows, then a batch's), with each input's sequence numbers
    rising across the runs or not, and rows in any order."""
    if layout == "grouped":  # the usual layout: by input, each input's rows in sequence order
        rows = sorted(rows, key=lambda r: (r[1], r[2]))
    elif layout == "runs":  # runs (4th field), each by input in sequence order
        rows = sorted(rows, key=lambda r: (r[3], r[1], r[2]))
    elif layout == "runs in sequence":  # ... and each input's seqs rise from run to run
        rows = sorted(((t, i, s + 10 * r, r) for t, i, s, r in rows),
                      key=lambda r: (r[3], r[1], r[2]))
    columns = [np.array(c, np.int64) for c in zip(*rows, strict=True)][:3] if rows else (
        [np.array([], np.int64)] * 3)
    ts, inputs, seqs = columns
    expected = np.lexsort((seqs, inputs, ts))
    assert total_order(ts, inputs, seqs).tolist() == expected.tolist()


def test_pending_then_new_rows_are_recognised_as_in_sequence() -> None:
    """The layout that takes the two-key sort: runs by input whose sequence numbers rise."""
    from spark_stream_sched.runtime.merge import _inputs_in_sequence

    inputs = np.array([0, 0, 1, 2, 0, 1, 1, 2])  # pending rows, then the batch's new rows
    rising = np.array([3, 5, 4, 9, 6, 7, 8, 10])
    cuts = np.array([2, 3, 4, 5, 7])  # where a segment of one input starts
    assert _inputs_in_sequence(inputs, rising, cuts)
    falling = rising.copy()
    falling[4] = 4  # input 0's new row comes before its pending row 5
    assert not _inputs_in_sequence(inputs, falling, cuts)
    assert not _inputs_in_sequence(np.zeros(100, np.int64), np.arange(100), np.arange(1, 100))
