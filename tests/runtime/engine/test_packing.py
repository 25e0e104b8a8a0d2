"""The packed wire of ``ordered()`` (runtime/engine/packing.py) loses, adds and changes nothing.

Pure PyArrow: ``pack`` and ``unpack`` are the functions Spark's ``mapInArrow`` stages run, here
called directly on Arrow batches as Spark would pass them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.engine.packing import (
    GROUP,
    ORDER,
    ROWS,
    pack,
    results_frame,
    unpack,
    unpack_frames,
)
from spark_stream_sched.runtime.engine.sequence_order import BEFORE_COL
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash
from spark_stream_sched.runtime.packets import INPUT_COL

PAYLOAD = pa.schema([("ts", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
                     ("meter", pa.string()), ("value", pa.float64()), ("pos", pa.int64())])
EXTREMES = [2**62 + 1, -(2**63), 2**63 - 1, 0, None]


def spark_batch(rows: list[tuple], end: list[bool]) -> pa.RecordBatch:
    """A batch as Spark hands it to ``mapInArrow``: payload, input id, end flag (its tz)."""
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in range(7)]
    ts, at, meter, value, pos, input_id = columns[:6]
    return pa.RecordBatch.from_arrays(
        [pa.array(ts, pa.int64()), pa.array(at, pa.timestamp("us", tz="Europe/Paris")),
         pa.array(meter, pa.string()), pa.array(value, pa.float64()), pa.array(pos, pa.int64()),
         pa.array(input_id, pa.int32()), pa.array(end, pa.bool_())],
        names=[*PAYLOAD.names, "_sss_input", "_sss_end"])


row = st.tuples(st.integers(-5, 10**12), st.none() | st.integers(0, 10**15),
                st.none() | st.sampled_from(["a", "b", "c", "d", "é"]),
                st.none() | st.floats(allow_nan=True, allow_infinity=True),
                st.sampled_from(EXTREMES), st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(row, st.booleans()), max_size=30), max_size=4),
       keys=st.sampled_from([(), ("meter",), ("meter", "pos")]), n_groups=st.integers(1, 5))
def test_pack_then_unpack_gives_each_group_its_rows_exactly(
        batches: list[list[tuple]], keys: tuple[str, ...], n_groups: int) -> None:
    """Every data row reaches exactly its key's group, bit-exact and in order; end rows are
    dropped; every group gets the partition's order summary once, naming every input with
    rows or an end-of-input marker, the latter marked ended."""
    packed = list(pack([spark_batch([r for r, _ in b], [e for _, e in b]) for b in batches],
                       PAYLOAD, keys, n_groups, "_sss_input", "_sss_end", "ts", "pos"))
    expected = pa.Table.from_pylist(
        [dict(zip([*PAYLOAD.names, INPUT_COL], r, strict=True))
         for b in batches for r, end in b if not end],
        schema=PAYLOAD.append(pa.field(INPUT_COL, pa.int32())))
    groups = (assign_to_partition_group(key_hash(expected, list(keys)), n_groups) if keys
              else np.zeros(expected.num_rows, np.int32))
    present = {r[-1] for b in batches for r, _ in b}
    ended = {r[-1] for b in batches for r, end in b if end}
    if not present:
        assert packed == []
        return
    (out,) = packed  # one partition: one packed batch
    assert out.schema.names == [ROWS, ORDER, GROUP]
    ids, blobs, orders = (out.column(c).to_pylist() for c in (GROUP, ROWS, ORDER))
    with_rows = [g for g, b in zip(ids, blobs, strict=True) if b is not None]
    assert len(set(with_rows)) == len(with_rows)  # one packed row per group with rows
    assert sorted(g for g, o in zip(ids, orders, strict=True) if o is not None) == list(
        range(n_groups))
    for g in range(n_groups):
        frame = pd.DataFrame({ROWS: [b for b, i in zip(blobs, ids, strict=True) if i == g],
                              ORDER: [o for o, i in zip(orders, ids, strict=True) if i == g]})
        got, summaries = unpack_frames([frame], expected.schema.append(
            pa.field(BEFORE_COL, pa.int64())))
        want = expected.filter(pa.array(groups == g))
        assert _same(got.drop_columns([BEFORE_COL]), want), (g, got.to_pylist())
        assert summaries.column("input").to_pylist() == sorted(present)
        assert {j for j, e in zip(summaries.column("input").to_pylist(),
                                  summaries.column("ended").to_pylist(), strict=True)
                if e} == ended
    assert sorted(set(with_rows)) == sorted(set(groups.tolist()))


def test_unpack_returns_the_results_in_sparks_types() -> None:
    """Results leave as one blob per call and come back as rows of the declared schema."""
    out = pa.table({"window_start": pa.array([1, None], pa.timestamp("us", tz="UTC")),
                    "n": pa.array([2**62 + 1, None], pa.int64()),
                    "v": pa.array([math.nan, None], pa.float64())})
    frame = results_frame(out)
    blobs = pa.RecordBatch.from_arrays([pa.array(frame.iloc[:, 0].tolist() + [None],
                                                 pa.binary())], names=["_sss_results"])
    spark_schema = pa.schema([("window_start", pa.timestamp("us", tz="Etc/UTC")),
                              ("n", pa.int64()), ("v", pa.float64())])
    got = pa.Table.from_batches(list(unpack([blobs], spark_schema)), spark_schema)
    assert got.schema == spark_schema
    assert got.column("n").to_pylist() == [2**62 + 1, None]
    values = got.column("v").to_pylist()
    assert math.isnan(values[0])
    assert values[1] is None
    assert got.column("window_start").cast(pa.int64()).to_pylist() == [1, None]


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables where NaN equals NaN (``Table.equals`` says NaN != NaN)."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True):
        for k in x:
            u, v = x[k], y[k]
            if isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v):
                continue
            if u != v:
                return False
    return True
