"""Floating keys group as Spark's ``groupBy`` does: ``-0.0`` is ``0.0``, every NaN one key.

The merged group is emitted with the normalised key (``0.0``, the quiet NaN ``0x7ff8...``), as
Spark emits it; aggregates still read the rows' own values (``first(f)`` of a ``-0.0`` row is
``-0.0``). Every float is compared bit for bit, NaN payloads included.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.keyed import build_operator, parse_stage
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate
from spark_stream_sched.testing.session_reference import reference_sessions


def from_bits(bits: int) -> float:
    """The double whose IEEE bits are ``bits``."""
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def bits(value: Any) -> Any:
    """Floats as their 64 bits (sign and NaN payload included); anything else as it is."""
    return struct.unpack("<Q", struct.pack("<d", value))[0] if isinstance(value, float) else value


QUIET_NAN = 0x7FF8000000000000
#: NaNs of four bit patterns: the quiet NaN, with the sign bit, with payloads.
NANS = [from_bits(b) for b in (QUIET_NAN, 0xFFF8000000000000, 0x7FF8000000000001,
                               0xFFF8000000000001, 0x7FF00000000000FF)]
FLOAT_KEYS = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -1.5, math.inf, *NANS]))
SCHEMA = pa.schema([("ts", pa.int64()), ("f", pa.float64()), ("g", pa.int64()),
                    ("v", pa.float64())])
AGGREGATES = ["count(*) as n", "sum(v) as sv", "first(f) as ff", "last(f) as lf",
              "count_where(v > 0) as pos", "max(v) as hi"]


def rows_of(ts: list[int], keys: list[float | None], values: list[float | None]) -> pa.Table:
    return pa.table({"ts": pa.array(ts, pa.int64()), "f": pa.array(keys, pa.float64()),
                     "g": pa.array([t % 2 for t in ts], pa.int64()),
                     "v": pa.array(values, pa.float64())}, schema=SCHEMA)


@st.composite
def float_keyed(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 60))
    gaps = draw(st.lists(st.sampled_from([0, 0, 1, 300, 1000, 2500]), min_size=n, max_size=n))
    ts = [sum(gaps[:i + 1]) for i in range(n)]
    keys = draw(st.lists(FLOAT_KEYS, min_size=n, max_size=n))
    values = draw(st.lists(st.one_of(st.none(), st.floats(-100, 100)), min_size=n, max_size=n))
    return rows_of(ts, keys, values)


def assert_bits_equal(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [{k: bits(v) for k, v in r.items()} for r in actual] == [
        {k: bits(v) for k, v in r.items()} for r in expected]


def windows(table: pa.Table, window: WindowSpec, keys: list[str], mode: str,
            step: int) -> list[dict[str, Any]]:
    """The aggregator over ``table`` in updates of ``step`` rows, then finished."""
    op = WindowAggregator(window, keys, AGGREGATES, "ts", SCHEMA, mode=mode)
    out = [op.update(table.slice(lo, step), int(table.column("ts")[lo].as_py()))
           for lo in range(0, table.num_rows, step)]
    return pa.concat_tables([*out, op.finish()]).to_pylist()


@settings(max_examples=80, deadline=None)
@given(float_keyed(), st.sampled_from([WindowSpec(3000, 1000), WindowSpec(2000, 2000)]),
       st.sampled_from([["f"], ["f", "g"], ["g", "f"]]),
       st.sampled_from(["auto", "dense", "sparse"]), st.integers(1, 25))
def test_window_keys_group_as_spark_on_every_path(table, window, keys, mode, step) -> None:
    expected = reference_aggregate([table], window, keys, AGGREGATES)
    assert_bits_equal(windows(table, window, keys, mode, step), expected)


def test_signed_zeros_and_nans_are_two_window_keys_emitted_normalised() -> None:
    table = rows_of(list(range(8)), [0.0, -0.0, NANS[0], NANS[3]] * 2, [1.0] * 8)
    for mode in ("auto", "dense", "sparse"):
        out = windows(table, WindowSpec(60_000, 60_000), ["f"], mode, 3)
        assert [(bits(r["f"]), r["n"]) for r in out] == [(QUIET_NAN, 4), (0, 4)]
        # the rows' own values: first(f) of the NaN group is the quiet NaN row, last(f) the
        # row with sign and payload
        assert [bits(r["lf"]) for r in out] == [bits(NANS[3]), bits(-0.0)]


def test_sessions_of_float_keys_are_emitted_with_the_normalised_key() -> None:
    keys = [-0.0, 0.0, NANS[3], NANS[0]]
    rows = rows_of([0, 1, 2, 3], keys, [1.0] * 4).append_column(
        INPUT_COL, pa.array([0] * 4, pa.int32())).append_column(
        SEQ_COL, pa.array(range(4), pa.int64()))
    op = build_operator(parse_stage("sessionize(10 ms)"), rows.schema, ["f"], "ts",
                        ("count(*) as n",))
    out = op.update(rows, TS_MAX).to_pylist()
    assert [(bits(r["f"]), r["n"]) for r in out] == [(0, 2), (QUIET_NAN, 2)]  # by end
    assert_bits_equal(out, reference_sessions(rows, ["f"], 10, ("count(*) as n",)))
