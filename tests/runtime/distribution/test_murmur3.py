"""The ``murmur3`` group function equals a row-by-row MurmurHash3 written from the algorithm.

The reference below follows Appleby's ``MurmurHash3_x86_32`` over the little-endian bytes of
each value (4 bytes for Spark's ``hashInt`` types, 8 for ``hashLong``; a string's UTF-8 bytes or
a binary's bytes with Spark's tail of one signed byte at a time for ``hashUnsafeBytes``), one
row at a time with Python integers; Spark's own ``hash`` is compared in
``tests/spark/test_partition_for_sink.py``.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.distribution.murmur3 import (
    murmur3_groups,
    murmur3_hash,
    murmur3_hashable,
)

M32 = 0xFFFFFFFF


def rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M32


def murmur3_x86_32(data: bytes, seed: int) -> int:
    """MurmurHash3_x86_32 of ``data`` as Spark's ``hashUnsafeBytes`` computes it, as a uint32.

    Whole little-endian words, then (Spark's tail) each byte left over as a sign-extended int.
    """
    h = seed & M32
    aligned = len(data) - len(data) % 4
    words = [k for (k,) in struct.iter_unpack("<I", data[:aligned])]
    for k in words + [(b - 256 if b >= 128 else b) & M32 for b in data[aligned:]]:
        k = rotl(k * 0xCC9E2D51 & M32, 15) * 0x1B873593 & M32
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & M32
    h ^= len(data)
    h = (h ^ (h >> 16)) * 0x85EBCA6B & M32
    h = (h ^ (h >> 13)) * 0xC2B2AE35 & M32
    return h ^ (h >> 16)


Value = int | float | str | bytes | None


def reference_hash(row: dict[str, Value], kinds: dict[str, pa.DataType]) -> int:
    """Spark's ``hash`` of one row: chained over the keys from seed 42, nulls skipped.

    ``row`` holds each key as the integer Spark hashes (a date's days since the epoch, a
    timestamp's microseconds, a boolean as 1 or 0), a float, a string or bytes. Floats hash
    their bits as Java's ``floatToIntBits`` / ``doubleToLongBits`` give them, -0.0 as 0.0.
    """
    h = 42
    for name, kind in kinds.items():
        value = row[name]
        if value is None:
            continue
        if isinstance(value, str | bytes):
            h = murmur3_x86_32(value.encode() if isinstance(value, str) else value, h)
            continue
        if isinstance(value, float):
            wide = pa.types.is_float64(kind)
            nan = struct.pack("<q", 0x7FF8000000000000) if wide else struct.pack("<i", 0x7FC00000)
            data = nan if math.isnan(value) else struct.pack("<d" if wide else "<f", value or 0.0)
            h = murmur3_x86_32(data, h)
            continue
        wide = pa.types.is_int64(kind) or pa.types.is_timestamp(kind)
        h = murmur3_x86_32(struct.pack("<q" if wide else "<i", int(value)), h)
    return h - (1 << 32) if h >= 1 << 31 else h


KINDS = {"l": pa.int64(), "i": pa.int32(), "s": pa.int16(), "b": pa.int8(), "z": pa.bool_(),
         "d": pa.date32(), "t": pa.timestamp("us", tz="UTC"), "n": pa.timestamp("us"),
         "u": pa.string(), "w": pa.large_string(), "y": pa.binary(), "f": pa.float64(),
         "g": pa.float32()}
BITS = {"l": 64, "i": 32, "s": 16, "b": 8}


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, list[str], list[dict[str, Value]]]:
    """A table of 1-4 key columns of mirrored types, and its rows as the integers hashed."""
    names = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=4, unique=True))
    rows = draw(st.integers(0, 40))
    columns: dict[str, pa.Array] = {}
    integers: dict[str, list[Value]] = {}
    for name in names:
        if name in BITS:
            bits = BITS[name]
            values = st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        elif name == "z":
            values = st.booleans()
        elif name == "d":
            values = st.integers(-700_000, 2_900_000)
        elif name in "uw":
            values = st.text(max_size=13)
        elif name == "y":
            values = st.binary(max_size=13)
        elif name in "fg":
            values = st.floats(width=64 if name == "f" else 32) | st.sampled_from(
                [0.0, -0.0, math.nan, -math.nan, math.inf])
        else:
            values = st.integers(-(1 << 60), 1 << 60)
        raw = draw(st.lists(st.none() | values, min_size=rows, max_size=rows))
        storage = pa.int64() if name in "tn" else pa.int32() if name == "d" else KINDS[name]
        columns[name] = pa.array(raw, storage).cast(KINDS[name]) if name in "dtn" else \
            pa.array(raw, KINDS[name])
        integers[name] = raw
    return pa.table(columns), names, [dict(zip(integers, r, strict=True))
                                      for r in zip(*integers.values(), strict=True)]


@settings(max_examples=300, deadline=None)
@given(case=tables(), n_groups=st.sampled_from([1, 2, 7, 16, 4096]))
def test_hash_and_groups_equal_the_row_by_row_reference(
        case: tuple[pa.Table, list[str], list[dict[str, Value]]], n_groups: int) -> None:
    table, names, rows = case
    kinds = {n: KINDS[n] for n in names}
    expected = [reference_hash(row, kinds) for row in rows]
    assert murmur3_hash(table, names).tolist() == expected
    groups = [h % n_groups for h in expected]  # Python's % of a positive n is Spark's pmod
    assert murmur3_groups(table, names, n_groups).tolist() == groups
    assert group_of_rows(table, names, n_groups, "murmur3").tolist() == groups


def test_known_values_of_sparks_hash() -> None:
    # SELECT hash(1), hash(0), hash(CAST(1 AS BIGINT)), hash(true), hash(1, 2),
    # hash(CAST(NULL AS INT)) in the installed Spark (4.x)
    table = pa.table({"i": pa.array([1, 0], pa.int32()), "l": pa.array([1, 0], pa.int64()),
                      "z": [True, False], "j": pa.array([2, 2], pa.int32()),
                      "null": pa.array([None, None], pa.int32())})
    assert murmur3_hash(table, ["i"]).tolist() == [-559580957, 933211791]
    assert murmur3_hash(table, ["l"])[0] == -1712319331
    assert murmur3_hash(table, ["z"])[0] == -559580957  # true hashes as the int 1
    assert murmur3_hash(table, ["i", "j"])[0] == -222940379
    assert murmur3_hash(table, ["null"]).tolist() == [42, 42]
    # SELECT hash(''), hash('a'), hash('abc'), hash('abcd'), hash('abcde'), hash('héllo wörld'),
    # hash(X'FF80'), hash(1, 'a'): every tail length, multi-byte UTF-8, bytes >= 0x80
    text = pa.table({"s": ["", "a", "abc", "abcd", "abcde", "héllo wörld"],
                     "i": pa.array([0, 1, 2, 3, 4, 5], pa.int32())})
    assert murmur3_hash(text, ["s"]).tolist() == [142593372, 1485273170, 1322437556, -396302900,
                                                  814637928, -281075962]
    assert murmur3_hash(pa.table({"b": [b"\xff\x80"]}), ["b"]).tolist() == [-577813652]
    assert murmur3_hash(text, ["i", "s"])[1] == -936062819
    # a slice of a column, whose offsets do not start at zero, hashes the same values
    assert murmur3_hash(text.slice(3), ["s"]).tolist() == [-396302900, 814637928, -281075962]
    # SELECT hash(0.0D), hash(-(0.0D)), hash(CAST('NaN' AS DOUBLE)), hash(1.5D),
    # hash(CAST('-Infinity' AS DOUBLE)); the same as FLOAT for 1.5, -0.0, NaN
    doubles = pa.table({"d": [0.0, -0.0, math.nan, 1.5, -math.inf],
                        "f": pa.array([1.5, -0.0, math.nan, 0.0, None], pa.float32())})
    assert murmur3_hash(doubles, ["d"]).tolist() == [-1670924195, -1670924195, -1281358385,
                                                     1290763749, 461104036]
    assert murmur3_hash(doubles, ["f"]).tolist() == [-221251528, 933211791, -349261430,
                                                     933211791, 42]


@pytest.mark.parametrize("kind", [pa.float16(), pa.uint32(), pa.timestamp("ns"), pa.date64(),
                                  pa.decimal128(10, 2), pa.list_(pa.int32())])
def test_types_without_a_mirror_are_refused(kind: pa.DataType) -> None:
    assert not murmur3_hashable(kind)
    table = pa.table({"k": pa.array([], kind)})
    with pytest.raises(ValueError, match="no Spark hash mirror"):
        murmur3_hash(table, ["k"])


def test_no_key_columns_is_one_group() -> None:
    table = pa.table({"x": np.arange(5)})
    assert group_of_rows(table, [], 16, "murmur3").tolist() == [0] * 5
