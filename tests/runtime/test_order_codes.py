"""Order codes (``lexicographic_codes``, ``dense_ids``) against Python's comparison of rows."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.order_codes import column_codes, dense_ids, lexicographic_codes
from tests.runtime.engine.test_order import TYPES, row_key
from tests.runtime.engine.test_order import tables as table_columns

# floats: -0.0 and 0.0 tie in a sort but are two values; sort_ascending keeps Arrow's sort for them
EXACT = tuple(sorted(k for k in TYPES if k != "float"))


def tables() -> st.SearchStrategy[tuple[tuple[pa.Table, list[str]], int]]:
    """Tables of up to four exact-typed columns, and a ``max_span`` (small: integers ranked)."""
    return st.tuples(table_columns(EXACT, (0, 4)), st.sampled_from([1, 3, 1 << 62]))


@settings(max_examples=500, deadline=None)
@given(tables())
def test_codes_compare_as_the_rows_do(case: tuple[tuple[pa.Table, list[str]], int]) -> None:
    """Every pair of rows: codes ordered and equal exactly as the rows are, within the span."""
    (table, columns), max_span = case
    codes, span = lexicographic_codes(table, columns, max_span)
    assert (codes.dtype.kind, len(codes)) == ("i", table.num_rows)
    assert all(0 <= c < span for c in codes.tolist())
    keys = [row_key(r, columns) for r in table.to_pylist()]
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            assert (codes[i] < codes[j]) == (a < b), (i, j)
            assert (codes[i] == codes[j]) == (a == b), (i, j)


@settings(max_examples=300, deadline=None)
@given(tables())
def test_dense_ids_number_the_distinct_rows_in_order(
        case: tuple[tuple[pa.Table, list[str]], int]) -> None:
    """Ids 0..k-1 in ascending order of the k distinct rows, which the table lists in id order."""
    (table, columns), _ = case
    ids, distinct = dense_ids(table, columns)
    rows = table.to_pylist()
    if not columns:
        assert (ids.tolist(), distinct.num_rows) == ([0] * len(rows), 0)
        return
    expected = sorted({row_key(r, columns) for r in rows})
    assert distinct.column_names == columns
    assert [row_key(r, columns) for r in distinct.to_pylist()] == expected
    assert [expected[i] for i in ids.tolist()] == [row_key(r, columns) for r in rows]


def _coded(column: pa.Array, max_span: int = 1 << 62) -> tuple[list[int], int, list | None]:
    codes, span, ranked = column_codes(column, max_span)
    return codes.tolist(), span, None if ranked is None else ranked.to_pylist()


def test_each_column_is_coded_by_offset_step_or_rank() -> None:
    """Window bounds: offsets over their common step; text, nulls and wide spans: ranks."""
    ends = pa.array([30_000, 0, 90_000, 30_000], pa.timestamp("ms"))
    assert _coded(ends) == ([1, 0, 3, 1], 4, None)  # step 30 s; 60 s is never seen
    assert _coded(pa.array(["b", "a", None, "b"])) == ([2, 1, 0, 2], 3, [None, "a", "b"])
    assert _coded(pa.array([5, None, -1], pa.int32())) == ([2, 0, 1], 3, [None, -1, 5])
    wide = pa.array([-(2**63), 2**63 - 1, 0], pa.int64())  # offsets would leave int64
    assert _coded(wide) == ([0, 2, 1], 3, [-(2**63), 0, 2**63 - 1])
    # an offset span of 3 above max_span 2: ranked
    assert _coded(pa.array([0, 10, 20], pa.int64()), max_span=2) == ([0, 1, 2], 3, [0, 10, 20])
    assert _coded(pa.array([7, 7], pa.uint8())) == ([0, 0], 1, None)


def test_spans_beyond_int64_are_renumbered_not_wrapped() -> None:
    """Two offset-coded columns of span 2**40 + 1: their product leaves int64, codes stay exact."""
    table = pa.table({"a": pa.array([2**40, 0, 2**40, 1], pa.int64()),
                      "b": pa.array([0, 2**40, 1, 0], pa.int64())})
    assert column_codes(table.column("a"))[1] == 2**40 + 1
    codes, span = lexicographic_codes(table, ["a", "b"])
    assert span == 3 * (2**40 + 1)  # "a" renumbered to its 3 values, "b" kept its offsets
    assert codes.argsort().tolist() == [1, 3, 0, 2]
    assert len(set(codes.tolist())) == 4
