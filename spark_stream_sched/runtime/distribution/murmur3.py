"""Partition groups by Spark SQL's own key hash, so Spark can route rows in one expression.

The runtime's first group function (:func:`~spark_stream_sched.runtime.keys.stable_key_hash`,
SplitMix64) is one Spark SQL cannot compute natively: its 64-bit unsigned products would need
dozens of projections of signed arithmetic per micro-batch. Spark's ``hash(k1, k2,
...)`` is Murmur3 x86 32-bit with seed 42, chained over the key columns (each column's hash is
the seed of the next, a null column leaves the running hash unchanged), and ``pmod(hash(...),
n)`` is one native expression. :func:`murmur3_groups` computes the same groups in NumPy, so
rows that Spark partitioned by ``pmod(hash(keys), n)`` land in the groups the runtime gives
them (the Spark tests compare the two on random keys).

Covered are the key types whose Spark hash is one of Murmur3's three entry points (Spark's
``HashExpression`` / ``Murmur3_x86_32``): ``hashInt`` of byte, short, int, boolean (0 or 1) and
date (days) values and of a float's bits, ``hashLong`` of bigint, timestamp (microseconds)
values and of a double's bits (for both, -0.0 hashes as 0.0 and every NaN as Java's canonical
NaN, as ``Float.floatToIntBits`` / ``Double.doubleToLongBits`` give it), and
``hashUnsafeBytes`` of a string's UTF-8 bytes (of any collation: Spark's ``hash`` hashes the
bytes, as the runtime compares them) or a binary value's bytes: whole little-endian 4-byte
words, then each byte left over mixed on its own as a *signed* int (Spark's tail, which differs
from Appleby's), then the finalizer with the byte length. Decimal, nested and other keys have
no mirror here; queries with such keys keep SplitMix64 (:func:`murmur3_hashable`).

Austin Appleby's MurmurHash3 (``MurmurHash3_x86_32``), as Spark implements it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime.keys import canonical

__all__ = ["SPARK_SEED", "murmur3_groups", "murmur3_hash", "murmur3_hashable"]

#: The seed of Spark SQL's ``hash`` function.
SPARK_SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def murmur3_hashable(kind: pa.DataType) -> bool:
    """Whether a key column of Arrow type ``kind`` has Spark's hash mirrored here.

    Signed integers (Spark's byte, short, int, bigint), booleans, floats and doubles,
    ``date32``, timestamps in microseconds (Spark's timestamp and timestamp_ntz), strings and
    binaries: the types Spark hands to Python.
    """
    return bool(pa.types.is_signed_integer(kind) or pa.types.is_boolean(kind)
                or pa.types.is_float32(kind) or pa.types.is_float64(kind)
                or pa.types.is_date32(kind) or _is_bytes(kind)
                or (pa.types.is_timestamp(kind) and kind.unit == "us"))


def _is_bytes(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def murmur3_hash(rows: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """Spark's ``hash(k1, k2, ...)`` of each row, as int32 (module doc; no keys: 42)."""
    h = np.full(rows.num_rows, SPARK_SEED, np.uint32)
    for name in key_columns:
        column = rows.column(name).combine_chunks()
        if not murmur3_hashable(column.type):
            raise ValueError(f"key column {name!r} of type {column.type} has no Spark hash "
                             f"mirror (integers, booleans, floats, dates, µs timestamps, "
                             f"strings, binaries)")
        mixed = _hash_column(column, h)
        h = np.where(column.is_null().to_numpy(zero_copy_only=False), h, mixed) \
            if column.null_count else mixed
    return h.view(np.int32)


def murmur3_groups(rows: pa.Table, key_columns: Sequence[str], n_groups: int) -> np.ndarray:
    """Spark's ``pmod(hash(k1, k2, ...), n_groups)`` of each row, as int32."""
    signed = murmur3_hash(rows, key_columns).astype(np.int64)
    return np.asarray(signed % n_groups, np.int32)  # NumPy's % of a positive n is pmod


def _hash_column(column: pa.Array, seed: np.ndarray) -> np.ndarray:
    """Murmur3 of every value of ``column`` with each row's running hash as seed."""
    kind = column.type
    if _is_bytes(kind):
        return _hash_bytes(column, seed)
    if pa.types.is_floating(kind):  # the runtime's equal keys: -0.0 is 0.0, one NaN
        return _hash_floating(canonical(column).fill_null(0).to_numpy(zero_copy_only=False), seed)
    if pa.types.is_timestamp(kind) or pa.types.is_date32(kind):
        column = column.view(pa.int64() if pa.types.is_timestamp(kind) else pa.int32())
    elif pa.types.is_boolean(kind):
        column = column.cast(pa.int32())
    values = column.fill_null(0).to_numpy(zero_copy_only=False)
    if values.dtype == np.int64:
        return _hash_long(values, seed)
    return _hash_int(values.astype(np.int32).view(np.uint32), seed)


def _hash_int(value: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashInt`` (4 bytes)."""
    return _fmix(_mix_h1(seed, _mix_k1(value)), 4)


def _hash_long(value: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashLong``: the low 32 bits, then the high 32 bits (8 bytes)."""
    bits = value.view(np.uint64)
    low = (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (bits >> np.uint64(32)).astype(np.uint32)
    return _fmix(_mix_h1(_mix_h1(seed, _mix_k1(low)), _mix_k1(high)), 8)


def _hash_floating(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's hash of canonical floats (``hashInt`` of their bits), doubles (``hashLong``)."""
    if values.dtype == np.float64:
        return _hash_long(values.view(np.int64), seed)
    return _hash_int(values.view(np.uint32), seed)


def _hash_bytes(column: pa.Array, seed: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` of each value's bytes (module doc).

    With one seed for every row (the first key column), each distinct value is hashed once.
    """
    if len(column) and column.null_count < len(column) and (seed == seed[0]).all():
        encoded = pc.dictionary_encode(column)
        distinct = _hash_bytes_of_rows(encoded.dictionary, seed[:len(encoded.dictionary)])
        return np.asarray(distinct[encoded.indices.fill_null(0).to_numpy()], np.uint32)
    return _hash_bytes_of_rows(column, seed)


def _hash_bytes_of_rows(column: pa.Array, seed: np.ndarray) -> np.ndarray:
    """``hashUnsafeBytes`` of every value of ``column``, vectorised over rows word by word."""
    column = column.cast(pa.large_binary())  # one layout: int64 offsets, then the bytes
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int64)[column.offset:column.offset + len(column) + 1]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    words, h = lengths // 4, seed.copy()
    for j in range(int(words.max(initial=0))):  # rows with a j-th whole word
        rows = np.flatnonzero(words > j)
        at = starts[rows] + 4 * j
        word = (data[at].astype(np.uint32) | data[at + 1].astype(np.uint32) << np.uint32(8)
                | data[at + 2].astype(np.uint32) << np.uint32(16)
                | data[at + 3].astype(np.uint32) << np.uint32(24))
        h[rows] = _mix_h1(h[rows], _mix_k1(word))
    for j in range(3):  # the bytes after the last whole word, each a sign-extended int
        rows = np.flatnonzero(lengths % 4 > j)
        byte = data[starts[rows] + 4 * words[rows] + j].view(np.int8).astype(np.int32)
        h[rows] = _mix_h1(h[rows], _mix_k1(byte.view(np.uint32)))
    return _fmix(h, lengths.astype(np.uint32))


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    rotated: np.ndarray = (x << np.uint32(r)) | (x >> np.uint32(32 - r))
    return rotated


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        mixed: np.ndarray = _rotl(k1 * _C1, 15) * _C2
    return mixed


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        mixed: np.ndarray = _rotl(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)
    return mixed


def _fmix(h1: np.ndarray, length: int | np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h1 = h1 ^ np.asarray(length, np.uint32)
        h1 = (h1 ^ (h1 >> np.uint32(16))) * np.uint32(0x85EBCA6B)
        h1 = (h1 ^ (h1 >> np.uint32(13))) * np.uint32(0xC2B2AE35)
        return np.asarray(h1 ^ (h1 >> np.uint32(16)), np.uint32)
