"""The sink's sequence check (``sink_rows.sequence_drops``) against a row-by-row reference."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import InputError
from spark_stream_sched.options.sink import parse_sink_options
from spark_stream_sched.runtime.engine.sink_rows import sequence_drops

INT_MIN = -(2**63)


def config(n_inputs: int, policy: str) -> Any:
    return parse_sink_options({
        "path": "/nowhere/out", "checkpointLocation": "/nowhere/ck", "inputs": str(n_inputs),
        "inputColumn": "input", "sequenceColumn": "pos", "endOfInputColumn": "end",
        "keyColumns": "k", "window": "10s", "slide": "10s", "aggregates": "count(*) as n",
        "outOfOrder": policy})


def reference(rows: list[list[tuple[int, int, str, bool]]],
              seen: list[int | None]) -> list[list[bool]]:
    """Per table, whether each row is dropped: per input, data rows by (pos, place in the
    batch), a row below the largest ts before it (or ``seen``) is dropped."""
    flat = [(t, r, row) for t, table in enumerate(rows) for r, row in enumerate(table)]
    dropped = [[False] * len(table) for table in rows]
    for i, top in enumerate(seen):
        running = INT_MIN if top is None else top
        mine = [(row[2], n, t, r, row[1]) for n, (t, r, row) in enumerate(flat)
                if row[0] == i and not row[3]]
        for _, _, t, r, ts in sorted(mine):
            if ts < running:
                dropped[t][r] = True
            running = max(running, ts)
    return dropped


row = st.tuples(st.integers(0, 2), st.integers(0, 40), st.text("ab", max_size=3), st.booleans())


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(row, max_size=12), min_size=1, max_size=3),
       seen=st.lists(st.none() | st.integers(0, 40), min_size=3, max_size=3))
def test_rows_dropped_along_the_sequence_equal_the_reference(
        rows: list[list[tuple[int, int, str, bool]]], seen: list[int | None]) -> None:
    # ends are rare in real batches: an end row is data-free and never dropped
    rows = [[(i, ts, pos, end and ts % 5 == 0) for i, ts, pos, end in t] for t in rows]
    tables = [pa.table({"input": pa.array([r[0] for r in t], pa.int32()),
                        "ts": pa.array([r[1] for r in t], pa.int64()),
                        "pos": pa.array([r[2] for r in t], pa.string()),
                        "end": pa.array([r[3] for r in t], pa.bool_())}) for t in rows]
    want = reference(rows, seen)
    got = sequence_drops(tables, config(3, "drop"), 7, seen)
    assert [m.tolist() for m in got] == want
    if any(any(m) for m in want):
        with pytest.raises(InputError, match="is out of order along 'pos'"):
            sequence_drops(tables, config(3, "fail"), 7, seen)
    else:
        assert not any(m.any() for m in sequence_drops(tables, config(3, "fail"), 7, seen))


def test_a_sequence_over_many_chunks_is_checked_as_one() -> None:
    # tasks' staged tables arrive as several chunks each; the check sorts them as one
    pos = pa.chunked_array([["a3", "a1"], ["a2"], ["a0"]])
    table = pa.table({"input": pa.array([0, 0, 0, 0], pa.int32()), "ts": pa.array(
        [30, 10, 20, 0], pa.int64()), "pos": pos, "end": pa.array([False] * 4)})
    got = sequence_drops([table.slice(0, 2), table.slice(2, 2)], config(1, "drop"), 0, [None])
    assert [m.tolist() for m in got] == [[False, False], [False, False]]
    late = table.set_column(1, "ts", pa.array([30, 10, 5, 0], pa.int64()))
    got = sequence_drops([late], config(1, "drop"), 0, [None])
    assert got[0].tolist() == [False, False, True, False]  # a2 (ts 5) after a1 (ts 10)
