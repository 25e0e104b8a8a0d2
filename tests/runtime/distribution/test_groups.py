"""Partition groups: a row's group, a task's groups, a batch cut by group (pure: no JVM)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.distribution.groups import (
    group_of_rows,
    group_range_for_task,
    initial_groups,
    split_by_group,
)
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash


@pytest.mark.parametrize("column", [
    pa.array([5, None, 7, 5, -3, 2**62], pa.int64()),
    pa.array(["a", None, "b", "a", "", "ü"]),
    pa.array([0.0, -0.0, float("nan"), None, 1.5, 1.5]),
])
def test_one_hash_per_distinct_key_equals_one_hash_per_row(column: pa.Array) -> None:
    table = pa.table({"meter": column})
    per_row = assign_to_partition_group(key_hash(table, ["meter"]), 7)
    assert group_of_rows(table, ["meter"], 7).tolist() == per_row.tolist()


INTEGER_TYPES = {pa.int8(): (-(2**7), 2**7 - 1), pa.uint8(): (0, 2**8 - 1),
                 pa.int16(): (-(2**15), 2**15 - 1), pa.int32(): (-(2**31), 2**31 - 1),
                 pa.int64(): (-(2**63), 2**63 - 1), pa.uint64(): (0, 2**63 - 1)}  # key_hash's range


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(INTEGER_TYPES, key=str)), st.data(), st.integers(1, 40))
def test_integer_keys_looked_up_by_span_equal_one_hash_per_row(
        arrow_type: pa.DataType, data: st.DataObject, n_groups: int) -> None:
    """A narrow span (looked up) or a wide one (dictionary), at the type's ends too."""
    lo, hi = INTEGER_TYPES[arrow_type]
    base = data.draw(st.sampled_from([lo, max(lo, hi - 2000), 0 if lo < 0 else lo, lo + 1]),
                     "base")
    width = data.draw(st.sampled_from([0, 3, 1500, hi - lo]), "width")
    values = data.draw(st.lists(st.integers(base, min(hi, base + width)), min_size=1,
                                max_size=60), "values")
    table = pa.table({"meter": pa.array(values, arrow_type)})
    per_row = assign_to_partition_group(key_hash(table, ["meter"]), n_groups)
    assert group_of_rows(table, ["meter"], n_groups).tolist() == per_row.tolist()


def test_several_key_columns_and_no_key() -> None:
    table = pa.table({"a": [1, 2, 1], "b": ["x", "y", "x"]})
    groups = group_of_rows(table, ("a", "b"), 5)
    assert groups.tolist() == assign_to_partition_group(key_hash(table, ["a", "b"]), 5).tolist()
    assert groups[0] == groups[2]
    assert group_of_rows(table, (), 5).tolist() == [0, 0, 0]


@given(st.integers(1, 64), st.integers(1, 16))
def test_initial_groups_are_contiguous_ranges_covering_every_group(n_groups: int,
                                                                   n_tasks: int) -> None:
    task_of = initial_groups(n_groups, n_tasks)
    assert len(task_of) == n_groups
    for task in range(n_tasks):
        assert [g for g, t in enumerate(task_of) if t == task] == list(
            group_range_for_task(task, n_tasks, n_groups))
    assert list(task_of) == sorted(task_of)


@settings(max_examples=50)
@given(st.lists(st.integers(0, 5), max_size=60))
def test_split_by_group_keeps_each_groups_rows_in_order(groups: list[int]) -> None:
    rows = pa.table({"i": list(range(len(groups)))})
    parts = split_by_group(rows, np.asarray(groups, np.int32))
    assert [g for g, _ in parts] == sorted(set(groups))
    for g, part in parts:
        assert part.column("i").to_pylist() == [i for i, x in enumerate(groups) if x == g]


@settings(max_examples=80)
@given(st.lists(st.sampled_from([0, 1, 3, 255, 256, 40_000, 70_000]), max_size=80),
       st.none() | st.frozensets(st.sampled_from([0, 1, 2, 3, 255, 256, 40_000, 70_000])))
def test_split_by_group_keeps_only_the_wanted_groups_in_row_order(
        groups: list[int], only: frozenset[int] | None) -> None:
    """The reference: one filter per group. Ids cover the 8-bit, 16-bit and 32-bit sort keys."""
    rows = pa.table({"i": list(range(len(groups))), "s": [str(g) for g in groups]})
    parts = split_by_group(rows, np.asarray(groups, np.int32), only=only)
    wanted = sorted(g for g in set(groups) if only is None or g in only)
    assert [g for g, _ in parts] == wanted
    for g, part in parts:
        assert part.column("i").to_pylist() == [i for i, x in enumerate(groups) if x == g]
        assert set(part.column("s").to_pylist()) == {str(g)}
