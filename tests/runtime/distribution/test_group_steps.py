"""The partition group as 64-bit-safe steps equals ``group_of_rows`` (pure: no JVM)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.distribution.group_steps import (
    LIMIT,
    _reads,
    evaluate,
    group_steps,
    sql_text,
    step_levels,
)
from spark_stream_sched.runtime.distribution.groups import group_of_rows

KINDS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.bool_(),
         pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us", "UTC"), pa.timestamp("ns"),
         pa.date32()]
EDGES = [0, -1, 1, 2**31 - 1, -2**31, 2**63 - 1, -2**63]


@st.composite
def key_tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 40))
    columns = {}
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(KINDS))
        if pa.types.is_boolean(kind):
            values = draw(st.lists(st.none() | st.booleans(), min_size=rows, max_size=rows))
        else:
            lo, hi = _range(kind)
            values = draw(st.lists(st.none() | st.sampled_from([e for e in EDGES if lo <= e <= hi])
                                   | st.integers(lo, hi), min_size=rows, max_size=rows))
        storage = pa.int32() if pa.types.is_date32(kind) else pa.int64()
        columns[f"k{i}"] = pa.array(values, storage if not pa.types.is_boolean(kind)
                                    else kind).cast(kind)
    return pa.table(columns)


def _range(kind: pa.DataType) -> tuple[int, int]:
    if pa.types.is_timestamp(kind):
        return -2**63, 2**63 - 1
    if pa.types.is_date32(kind):
        return -2**31, 2**31 - 1
    info = np.iinfo(kind.to_pandas_dtype())
    return int(info.min), int(info.max)


@settings(max_examples=200, deadline=None)
@given(key_tables(), st.sampled_from([1, 2, 7, 64, 1000, 65_536, 2**31 - 1]))
def test_steps_give_the_group_of_rows(table: pa.Table, n_groups: int) -> None:
    """Every key type with steps, nulls and extreme values; no step leaves 0 .. 2**62."""
    keys = table.column_names
    values = {k: _as_int64(table.column(k).combine_chunks()) for k in keys}
    nulls = {k: table.column(k).is_null().to_numpy(zero_copy_only=False) for k in keys}
    got = evaluate(group_steps(keys, n_groups), values, nulls)  # raises past LIMIT
    assert got.tolist() == group_of_rows(table, keys, n_groups).tolist()


def _as_int64(column: pa.Array) -> np.ndarray:
    """The value the hash reads: dates as day numbers, the rest cast to int64; nulls as 0."""
    if pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    return column.cast(pa.int64()).fill_null(0).to_numpy()


def test_evaluate_refuses_a_step_that_would_overflow() -> None:
    from spark_stream_sched.runtime.distribution.group_steps import Step

    steps = [Step("x", ("*", ("col", "k"), ("lit", 1 << 40)))]
    assert evaluate(steps, {"k": np.array([1 << 20])}).tolist() == [1 << 60]
    with pytest.raises(ValueError, match="leaves 0"):
        evaluate(steps, {"k": np.array([LIMIT >> 40])})


def test_no_keys_is_group_zero_and_group_counts_are_checked() -> None:
    assert evaluate(group_steps([], 5), {}).tolist() == [0]
    with pytest.raises(ValueError, match="n_groups"):
        group_steps(["k"], 2**31)


def test_each_level_reads_only_keys_and_lower_levels() -> None:
    steps = group_steps(["a", "b"], 64)
    levels = step_levels(steps)
    assert sorted(s.name for level in levels for s in level) == sorted(s.name for s in steps)
    assert levels[-1] == [steps[-1]]  # the group comes last, alone
    seen = {"a", "b"}
    for level in levels:
        assert all(set(_reads(s.expr)) <= seen for s in level)
        seen |= {s.name for s in level}


def test_sql_text_writes_spark_functions_literals_and_null_cases() -> None:
    expr = ("&", (">>>", ("null", "k", ("lit", 0), ("col", "k")), ("lit", 32)), ("lit", 7))
    assert sql_text(expr) == (
        "(shiftrightunsigned(CASE WHEN k IS NULL THEN 0L ELSE k END, 32) & 7L)")
