"""Stable key hashing, partition-group ranges and key equality on values."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.keys import (
    assign_to_partition_group,
    equal_keys,
    group_range_for_task,
    hashed_with,
    key_codes,
    key_hash,
    key_ids,
    stable_key_hash,
)
from spark_stream_sched.testing.keyed_reference import key_of

TABLE = pa.table({"s": ["a", "b", None, "a"], "i": [1, 2, 3, 1], "f": [0.0, -0.0, None, 0.0]})


def test_hash_is_stable_across_processes() -> None:
    code = ("import json, pyarrow as pa; from spark_stream_sched.runtime.keys import key_hash;"
            "t = pa.table({'s': ['a', 'b', None, 'a'], 'i': [1, 2, 3, 1]});"
            "print(json.dumps(key_hash(t, ['s', 'i']).tolist()))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": str(seed)}).stdout
            for seed in (1, 2)}
    assert len(runs) == 1
    assert json.loads(runs.pop()) == key_hash(TABLE, ["s", "i"]).tolist()


def test_equal_keys_hash_equal_and_zero_signs_agree() -> None:
    h = key_hash(TABLE, ["s", "i"])
    assert h[0] == h[3]
    assert len(set(h.tolist())) == 3
    f = key_hash(TABLE, ["f"])
    assert f[0] == f[1] == f[3]
    assert f[2] != f[0]


@given(st.lists(st.none() | st.integers(-10**6, 10**6), min_size=1, max_size=50))
def test_date_keys_hash_as_their_day_or_millisecond_numbers(days: list[int | None]) -> None:
    """Arrow casts no date type to int64 directly (a date key used to fail with Arrow's error)."""
    as_int = key_hash(pa.table({"k": pa.array(days, pa.int64())}), ["k"])
    date32 = pa.array(days, pa.int32()).cast(pa.date32())
    assert key_hash(pa.table({"k": date32}), ["k"]).tolist() == as_int.tolist()
    ms = [None if d is None else d * 86_400_000 for d in days]
    assert key_hash(pa.table({"k": pa.array(ms, pa.int64()).cast(pa.date64())}), ["k"]).tolist() \
        == key_hash(pa.table({"k": pa.array(ms, pa.int64())}), ["k"]).tolist()
    ids = key_ids(pa.table({"k": date32}), ["k"]).tolist()
    assert [ids[i] == ids[j] for i in range(len(days)) for j in range(len(days))] == [
        days[i] == days[j] for i in range(len(days)) for j in range(len(days))]


@given(st.lists(st.none() | st.integers(0, 2**64 - 1), min_size=1, max_size=60))
def test_uint64_keys_hash_over_their_full_range(values: list[int | None]) -> None:
    """A uint64 key above the int64 range used to fail with Arrow's range error; values in
    the int64 range hash as the same int64 values do, and equal keys hash equal."""
    h = key_hash(pa.table({"k": pa.array(values, pa.uint64())}), ["k"]).tolist()
    pairs = [(i, j) for i in range(len(values)) for j in range(len(values))]
    assert all(h[i] == h[j] for i, j in pairs if values[i] == values[j])
    small = [v if v is None or v < 2**63 else None for v in values]
    assert key_hash(pa.table({"k": pa.array(small, pa.uint64())}), ["k"]).tolist() == \
        key_hash(pa.table({"k": pa.array(small, pa.int64())}), ["k"]).tolist()
    ids = key_ids(pa.table({"k": pa.array(values, pa.uint64())}), ["k"]).tolist()
    assert [ids[i] == ids[j] for i, j in pairs] == [values[i] == values[j] for i, j in pairs]


@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=200), st.integers(1, 64))
def test_groups_are_in_range_and_a_function_of_the_key(values, n_groups) -> None:
    table = pa.table({"k": pa.array(values, pa.int64())})
    groups = assign_to_partition_group(key_hash(table, ["k"]), n_groups)
    assert groups.min() >= 0
    assert groups.max() < n_groups
    by_key: dict[int, set[int]] = {}
    for v, g in zip(values, groups.tolist(), strict=True):
        by_key.setdefault(v, set()).add(g)
    assert all(len(gs) == 1 for gs in by_key.values())


@given(st.integers(1, 16), st.integers(1, 200))
def test_task_ranges_cover_every_group_exactly_once(n_tasks, n_groups) -> None:
    covered = [g for t in range(n_tasks) for g in group_range_for_task(t, n_tasks, n_groups)]
    assert covered == list(range(n_groups))


def test_hash_spreads_keys_over_groups() -> None:
    table = pa.table({"k": pa.array([f"meter-{i}" for i in range(2430)])})
    counts = np.bincount(assign_to_partition_group(key_hash(table, ["k"]), 16), minlength=16)
    assert counts.min() > 2430 / 16 / 2


KEY_VALUES = st.tuples(st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan, -math.nan,
                                                               math.inf])),
                       st.one_of(st.none(), st.sampled_from(["a", "b", ""])))


@given(st.lists(KEY_VALUES, max_size=40))
def test_key_codes_are_equal_iff_the_values_are(values) -> None:
    table = pa.table({"f": pa.array([v[0] for v in values], pa.float64()),
                      "s": pa.array([v[1] for v in values], pa.string()).dictionary_encode()})
    rows = table.to_pylist()
    keys = [key_of(r, ["f", "s"]) for r in rows]  # the oracles' rule: Spark's grouping
    few = key_hash(table, ["f", "s"]) % np.uint64(2)  # distinct keys collide
    for codes in (key_codes(table, ["f", "s"]), key_ids(table, ["f", "s"]),
                  key_ids(table, ["f", "s"], few),
                  key_ids(table, ["f", "s"], np.zeros(len(rows), np.uint64))):
        assert sorted(set(codes.tolist())) == list(range(len(set(keys))))
        for i in range(len(rows)):
            for j in range(len(rows)):
                assert (codes[i] == codes[j]) == (keys[i] == keys[j])
    other = table.take(pa.array(list(reversed(range(len(rows)))), pa.int64()))
    same = equal_keys(table, other).tolist()
    assert same == [keys[i] == keys[len(rows) - 1 - i] for i in range(len(rows))]


def test_hashed_with_replaces_the_hash_inside_the_block_only() -> None:
    before = key_hash(TABLE, ["s"]).tolist()
    with hashed_with(lambda t, c: np.zeros(t.num_rows, np.uint64)):
        assert key_hash(TABLE, ["s"]).tolist() == [0, 0, 0, 0]
    assert key_hash(TABLE, ["s"]).tolist() == before == stable_key_hash(TABLE, ["s"]).tolist()


def test_unsupported_key_types_are_refused_for_equality_too() -> None:
    table = pa.table({"l": pa.array([[1], [2]])})
    with pytest.raises(ConfigError, match="not supported"):
        key_codes(table, ["l"])
