"""Distinct keys never share state, even when every key has the same hash.

The stable 64-bit key hash routes keys to partition groups and narrows lookups; only key
values decide whether two tuples have the same key. Here the hash is forced
(:func:`~spark_stream_sched.runtime.keys.hashed_with`) to one value for every key, or to three
values, and every keyed operator -- the row operators, ``udf``, ``sessionize``, ``dedup``'s
entries, the join (with state spilled and cleaned up) and the executor's running aggregates --
must still equal its oracle exactly, across cuts, ready bounds and a snapshot/restore.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.executor.stateful import KeyedOperator as RunningOperator
from spark_stream_sched.runtime.keyed.base import KeyedOperator, build_operator
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.stage import parse_stage
from spark_stream_sched.runtime.keys import KeyHasher, hashed_with, stable_key_hash
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind
from spark_stream_sched.runtime.state.snapshot import decode, encode
from spark_stream_sched.testing import keyed_reference as ref
from spark_stream_sched.testing.join_reference import reference_join
from spark_stream_sched.testing.session_reference import reference_sessions

from . import udfs
from .test_join import SCHEMA as JOIN_SCHEMA
from .test_join import exact as join_exact
from .test_join import join_rows, stage
from .test_join import run as run_join
from .test_rows import assert_same, build, chunking, keyed_rows, run

PROFILE = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _one_hash(table: pa.Table, columns: Any) -> np.ndarray:
    return np.zeros(table.num_rows, np.uint64)


def _three_hashes(table: pa.Table, columns: Any) -> np.ndarray:
    return stable_key_hash(table, columns) % np.uint64(3)


HASHERS = pytest.mark.parametrize("hasher", [_one_hash, _three_hashes],
                                  ids=["one hash", "three hashes"])
KEYS = st.sampled_from([["k"], ["k", "g"], ["g"], ["v"], ["s", "b"]])


def _row_stage(draw: st.DrawFn, keys: list[str]) -> tuple[str, Callable[[pa.Table], Any]]:
    """A row operator stage and its oracle over ``keys``."""
    choice = draw(st.sampled_from(["running", "delta", "lag", "dedup", "udf"]))
    if choice == "running":
        aggs = ["count(*) as n", "sum(i) as si", "first(s) as fs", "max(v) as mv"]
        return (f"running({', '.join(aggs)})",
                lambda rows: ref.reference_running(rows, keys, aggs))
    if choice == "delta":
        return "delta(i)", lambda rows: ref.reference_delta(rows, keys, "i")
    if choice == "lag":
        return "lag(s, 2) as prev", lambda rows: ref.reference_lag(rows, keys, "s", 2, "prev")
    if choice == "dedup":  # entries are (key, values): collisions among entries too
        return ("dedup(s, i, within=3 ms)",
                lambda rows: ref.reference_dedup(rows, keys, ["s", "i"], 3))
    return (f"udf({udfs.__name__}:every_other)",
            lambda rows: ref.reference_udf(rows, keys, udfs.every_other))


@HASHERS
@PROFILE
@given(keyed_rows(), KEYS, st.data())
def test_row_operators_keep_colliding_keys_apart(hasher: KeyHasher, rows: pa.Table,
                                                 keys: list[str], data: st.DataObject) -> None:
    text, oracle = _row_stage(data.draw, keys)
    plan = data.draw(chunking(rows))

    def make() -> KeyedOperator:
        return build(text, keys)

    with hashed_with(hasher):
        assert_same(run(make, rows, plan), oracle(rows))


@HASHERS
@PROFILE
@given(keyed_rows(), KEYS, st.integers(1, 20), st.data())
def test_sessions_keep_colliding_keys_apart(hasher: KeyHasher, rows: pa.Table, keys: list[str],
                                            gap: int, data: st.DataObject) -> None:
    aggs = ("count(*) as n", "first(i) as fi")
    plan = data.draw(chunking(rows))

    def make() -> KeyedOperator:
        return build_operator(parse_stage(f"sessionize({gap} ms)"), rows.schema, keys, "ts",
                              aggs)

    with hashed_with(hasher):
        out = run(make, rows, plan)
    assert_same(out, reference_sessions(rows, keys, gap, aggs))


@HASHERS
@PROFILE
@given(st.integers(2, 3), st.sampled_from([["k"], ["k", "g"], ["g"]]),
       st.sampled_from([None, 3, 10]), st.sampled_from([None, 0, 400]), st.data())
def test_join_matches_only_equal_keys(hasher: KeyHasher, n: int, keys: list[str],
                                      within: int | None, budget: int | None,
                                      data: st.DataObject) -> None:
    rows = data.draw(join_rows(n, 30))
    plan = data.draw(chunking(rows))
    expected = join_exact(reference_join(rows, keys, n, within))
    with tempfile.TemporaryDirectory() as root, hashed_with(hasher):

        def make() -> Join:
            return Join(stage(n, within), JOIN_SCHEMA, keys, "ts", memory_budget=budget,
                        spill_dir=root, n_groups=3)

        out, _ = run_join(make, rows, plan)
    assert join_exact(out.to_pylist()) == expected


@HASHERS
@PROFILE
@given(keyed_rows(), st.sampled_from([["k"], ["k", "g"], ["v"]]),
       st.sampled_from(["running_count", "running_sum"]), st.lists(st.integers(1, 9)))
def test_executor_running_aggregates_keep_colliding_keys_apart(
        hasher: KeyHasher, rows: pa.Table, keys: list[str], function: str,
        packets: list[int]) -> None:
    definition = OperatorDef("r", OperatorKind.KEYED, ("s",),
                             params={"keys": keys, "function": function, "column": "i"})
    with hashed_with(hasher):
        op = RunningOperator(definition, rows.schema)
        outputs, at = [], 0
        for size in [*packets, rows.num_rows]:
            outputs.append(op.apply(rows.slice(at, size), None))
            at += size
    totals: dict[tuple[Any, ...], int] = {}
    expected = []
    for row in rows.to_pylist():
        key = ref.key_of(row, keys)
        step = 1 if function == "running_count" else (row["i"] or 0)
        totals[key] = totals.get(key, 0) + step
        expected.append(totals[key])
    assert pa.concat_tables(outputs).column(function).to_pylist() == expected


def test_colliding_keys_in_one_packet_and_across_packets() -> None:
    """The smallest case, spelled out: keys 'a' and 'b' share a hash and stay apart."""
    rows = pa.table({"ts": pa.array([0, 1, 2, 3], pa.int64()),
                     INPUT_COL: pa.array([0, 0, 0, 0], pa.int32()),
                     SEQ_COL: pa.array([0, 1, 2, 3], pa.int64()),
                     "k": ["a", "b", "a", "b"], "x": pa.array([1, 10, 2, 20], pa.int64())})
    with hashed_with(_one_hash):
        op = build("running(sum(x) as total)", ["k"], rows.schema)
        first = op.update(rows.slice(0, 2), 2)
        restored = type(op).restore(op.snapshot())
        second = restored.update(rows.slice(2), TS_MAX)
    assert first.column("total").to_pylist() == [1, 10]
    assert second.column("total").to_pylist() == [3, 30]


def test_sessions_group_float_keys_as_spark_does() -> None:
    """``-0.0`` and ``0.0`` are one key, every NaN is one key (Spark's grouping)."""
    keys = [0.0, -0.0, math.nan, -math.nan, None, None]
    rows = pa.table({"ts": pa.array([0, 1, 2, 3, 4, 5], pa.int64()),
                     INPUT_COL: pa.array([0] * 6, pa.int32()),
                     SEQ_COL: pa.array(range(6), pa.int64()),
                     "f": pa.array(keys, pa.float64())})
    op = build_operator(parse_stage("sessionize(10 ms)"), rows.schema, ["f"], "ts",
                        ("count(*) as n",))
    out = pa.concat_tables([op.update(rows, None), op.finish()])
    assert sorted(out.column("n").to_pylist()) == [2, 2, 2]
    assert len(reference_sessions(rows, ["f"], 10, ("count(*) as n",))) == 3


@pytest.mark.parametrize("text", ["delta(i)", "running(count(*) as n)", "lag(s, 2)",
                                  "dedup(s, within=1s)", f"udf({udfs.__name__}:every_other)"])
def test_state_of_the_hash_only_format_is_refused_with_advice(text: str) -> None:
    rows = pa.table({"ts": pa.array([0], pa.int64()), INPUT_COL: pa.array([0], pa.int32()),
                     SEQ_COL: pa.array([0], pa.int64()), "k": ["a"], "i": pa.array([1]),
                     "s": ["x"], "v": [0.5]})
    op = build(text, ["k"], rows.schema)
    op.update(rows, None)
    kind = "keyed.udf" if text.startswith("udf") else f"keyed.{op.name}"
    meta, tables = decode(op.snapshot(), kind)
    del meta["format"]  # what the previous release wrote (its tables held only the hash)
    with pytest.raises(StateError, match=r"state format 1.*hash.*new checkpoint location"):
        type(op).restore(encode(kind, meta, tables))
    assert type(op).restore(op.snapshot()).snapshot() == op.snapshot()
