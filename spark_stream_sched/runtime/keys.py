"""Key-group math: stable key hashes, key -> partition-group assignment, and key equality.

Like Flink's ``KeyGroupRangeAssignment``: a key is hashed with a *stable* function (never the
builtin ``hash()``, which is salted per process, and Spark executors are separate processes),
the hash picks one of ``n_groups`` partition groups, and a task owns a contiguous range of
groups. The number of groups is fixed when a query first starts (Liu & Rundensteiner,
*Adapting State-Intensive Non-Blocking Queries over Distributed Environments*, §3: the
partition group is the unit of state, spilling and movement).

**A hash routes; it never decides equality.** Two distinct keys may share a 64-bit hash (over
10**9 distinct keys the chance that some pair does is about 2.7%), so :func:`key_hash` only
picks partition groups and tasks and narrows lookups; whether two rows have the *same* key is
decided on the key values (:func:`key_ids`, :func:`key_codes`, :func:`equal_keys`), with one
rule, the one of Spark's grouping: nulls are one value (equal to each other), ``-0.0`` equals
``0.0``, and every NaN equals every NaN. :func:`hashed_with` replaces the hash function inside
a block, so tests can force every key onto a few hashes and check that keyed state stays exact.

Hashing is vectorised: numeric columns are mixed with SplitMix64 in NumPy; string and binary
columns are dictionary-encoded and each *distinct* value is hashed once with XXH64 of its UTF-8
bytes (:func:`~spark_stream_sched.runtime.xxh64.xxh64`, vectorised in NumPy); nulls hash to a
fixed constant. Key codes are Arrow dictionary encodings (a hash table
that compares values) of each column's canonical form (:func:`canonical`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.xxh64 import xxh64

_NULL_HASH = np.uint64(0x9E3779B97F4A7C15)
_SEED = np.uint64(0x5851F42D4C957F2D)


def _unsupported(kind: pa.DataType) -> ConfigError:
    return ConfigError(f"key columns of type {kind} are not supported; use integers, floats, "
                       f"booleans, dates, timestamps or strings")


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def _column_hash(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.cast(kind.value_type)
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        encoded = pc.dictionary_encode(array)
        table = xxh64(encoded.dictionary)
        indices = encoded.indices.fill_null(0).to_numpy().astype(np.int64)
        hashes = table[indices] if len(table) else np.zeros(len(array), np.uint64)
    elif pa.types.is_floating(kind):
        values = array.cast(pa.float64()).fill_null(0.0).to_numpy().copy()
        values[values == 0.0] = 0.0  # -0.0 and 0.0 are one key
        values[np.isnan(values)] = np.nan
        hashes = _splitmix64(values.view(np.int64))
    elif pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_temporal(kind):
        if pa.types.is_date(kind):  # days (date32) or ms (date64): Arrow casts no date to int64
            array = array.cast(pa.int32() if pa.types.is_date32(kind) else pa.int64())
        # uint64 above the int64 range keeps its 64 bits (an unchecked cast wraps it to a
        # negative int64, which no value of the same column has); every other value hashes
        # as before
        values = array.cast(pa.int64(), safe=not pa.types.is_uint64(kind)).fill_null(0)
        hashes = _splitmix64(values.to_numpy())
    else:
        raise _unsupported(kind)
    if array.null_count:
        hashes = np.where(array.is_null().to_numpy(zero_copy_only=False), _NULL_HASH, hashes)
    return hashes


def stable_key_hash(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """Stable 64-bit hash of each row's key (the same in every process and on every run)."""
    h = np.full(table.num_rows, _SEED, dtype=np.uint64)
    for name in key_columns:
        h = _splitmix64(h ^ _column_hash(table.column(name)))
    return h


#: A key hash function: ``(table, key_columns) -> uint64 per row``, equal keys to equal hashes.
KeyHasher = Callable[[pa.Table, Sequence[str]], np.ndarray]
_hasher: KeyHasher = stable_key_hash


def key_hash(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """64-bit hash of each row's key: :func:`stable_key_hash` unless :func:`hashed_with` is on.

    Equal keys hash equal; distinct keys may too, so callers route and narrow lookups with it
    and compare key values (:func:`equal_keys`) before treating two keys as one.
    """
    return np.asarray(_hasher(table, key_columns), dtype=np.uint64)


@contextmanager
def hashed_with(hasher: KeyHasher) -> Iterator[None]:
    """Make :func:`key_hash` use ``hasher`` inside the block (for tests that force collisions).

    ``hasher`` must still give equal keys equal hashes. Process-wide (worker threads see it);
    the previous function is restored on exit.
    """
    global _hasher
    previous, _hasher = _hasher, hasher
    try:
        yield
    finally:
        _hasher = previous


# -- key equality ------------------------------------------------------------------------------

def canonical_type(kind: pa.DataType) -> pa.DataType:
    """Type of a key column's canonical form (a dictionary column's value type)."""
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def canonical(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A key column as one array whose equal values are equal keys.

    Dictionary columns are decoded; in floating columns ``+ 0.0`` turns ``-0.0`` into ``0.0``
    (and changes no other value) and every NaN becomes the one quiet NaN (NaNs differ in sign
    and payload bits); nulls stay null.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    kind = array.type
    if pa.types.is_floating(kind):
        array = pc.add(array, pa.scalar(0.0, kind))
        return pc.if_else(pc.is_nan(array), pa.scalar(float("nan"), kind), array)
    if not (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_temporal(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        raise _unsupported(kind)
    return array


def canonical_keys(table: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """``table`` with each of ``key_columns`` in its :func:`canonical` form, types kept.

    Only floating values change: ``-0.0`` becomes ``0.0`` and every NaN the one quiet NaN,
    the value a group of equal keys is emitted with (Spark's grouping normalises its keys
    so). Other columns are untouched.
    """
    for name in key_columns:
        i = table.schema.get_field_index(name)
        kind = table.schema.field(i).type
        if pa.types.is_floating(canonical_type(kind)):
            table = table.set_column(i, name, canonical(table.column(i)).cast(kind))
    return table


def _codes(array: pa.Array) -> np.ndarray:
    """Dictionary index of every value of a canonical column (nulls get an index of their own)."""
    indices = pc.dictionary_encode(array, null_encoding="encode").indices
    return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def key_codes(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """Dense int64 code per row: two rows have equal codes iff their keys are equal.

    Equality as in the module docstring (nulls equal, ``-0.0 == 0.0``, NaN equals NaN); no key
    columns: one key. Codes are ``0 .. distinct - 1``.
    """
    code = np.zeros(table.num_rows, dtype=np.int64)
    for i, name in enumerate(key_columns):
        index = _codes(canonical(table.column(name)))  # dense: 0 .. distinct - 1
        if i == 0:
            code = index
            continue
        combined = code * (int(index.max(initial=0)) + 1) + index  # < rows**2: no overflow
        code = np.unique(combined, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return code


def key_ids(table: pa.Table, key_columns: Sequence[str],
            hashes: np.ndarray | None = None) -> np.ndarray:
    """Dense int64 id per row, equal iff the keys are equal, numbered in ascending hash order.

    The hash groups the rows (``hashes``: each row's :func:`key_hash`, computed if None), and
    every row's key is compared with one row of its hash group (:func:`equal_keys`). Only where
    distinct keys share a hash are the groups split, by :func:`key_codes`.
    """
    hashes = key_hash(table, key_columns) if hashes is None else hashes
    distinct, ids = np.unique(hashes, return_inverse=True)
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if not key_columns or not table.num_rows:
        return ids
    member = np.empty(len(distinct), dtype=np.int64)
    member[ids] = np.arange(table.num_rows)  # some row of each hash group (any one will do)
    keys = table.select(list(key_columns))
    if equal_keys(keys, keys.take(pa.array(member[ids], pa.int64()))).all():
        return ids
    codes = key_codes(table, key_columns)  # distinct keys share a hash: split by value
    split = ids * (int(codes.max()) + 1) + codes  # < rows**2: no overflow
    return np.asarray(np.unique(split, return_inverse=True)[1], dtype=np.int64).reshape(-1)


def equal_keys(left: pa.Table, right: pa.Table) -> np.ndarray:
    """Row-wise key equality of two tables of key columns, compared by position.

    The rule of :func:`key_codes` (nulls equal, ``-0.0 == 0.0``, NaN equals NaN). ``left`` and
    ``right`` have the same number of rows and, column by column, the same
    :func:`canonical_type`; no columns: every row is equal.
    """
    same = np.ones(left.num_rows, dtype=bool)
    for a, b in zip(left.columns, right.columns, strict=True):
        same &= _equal_values(a, b)
    return same


def _equal_values(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Element-wise key equality of two columns (see :func:`equal_keys`)."""
    a, b = (x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x for x in (a, b))
    a, b = (x.cast(x.type.value_type) if pa.types.is_dictionary(x.type) else x for x in (a, b))
    kind = a.type
    if not a.null_count and not b.null_count and (
            pa.types.is_integer(kind) or pa.types.is_floating(kind)):  # NumPy: no Arrow calls
        x, y = a.to_numpy(), b.to_numpy()
        same = np.asarray(x == y, dtype=bool)  # -0.0 == 0.0
        return same | (np.isnan(x) & np.isnan(y)) if pa.types.is_floating(kind) else same
    a, b = canonical(a), canonical(b)
    equal = pc.equal(a, b).fill_null(False)  # NaN != NaN here
    if pa.types.is_floating(kind):
        equal = pc.or_(equal, pc.and_(pc.is_nan(a), pc.is_nan(b)).fill_null(False))
    both_null = pc.and_(a.is_null(), b.is_null())
    return np.asarray(pc.or_(equal, both_null).to_numpy(zero_copy_only=False), dtype=bool)


def assign_to_partition_group(key_hashes: np.ndarray, n_groups: int) -> np.ndarray:
    """Partition group (``0 .. n_groups-1``) of each key hash."""
    if n_groups < 1:
        raise ConfigError(f"the number of partition groups must be positive, got {n_groups}")
    return np.asarray(key_hashes % np.uint64(n_groups), dtype=np.int32)


def group_range_for_task(task_index: int, n_tasks: int, n_groups: int) -> range:
    """Contiguous range of partition groups owned by task ``task_index`` of ``n_tasks``."""
    if not 0 <= task_index < n_tasks:
        raise ConfigError(f"task index {task_index} is out of range 0..{n_tasks - 1}")
    start = task_index * n_groups // n_tasks
    end = (task_index + 1) * n_groups // n_tasks
    return range(start, end)
