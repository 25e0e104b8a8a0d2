"""Key-group math: stable key hashes and key -> partition-group assignment.

Like Flink's ``KeyGroupRangeAssignment``: a key is hashed with a *stable* function (never the
builtin ``hash()``, which is salted per process, and Spark executors are separate processes),
the hash picks one of ``n_groups`` partition groups, and a task owns a contiguous range of
groups. The number of groups is fixed when a query first starts (seed 003 §3: the partition
group is the unit of state, spilling and movement).

Hashing is vectorised: numeric columns are mixed with SplitMix64 in NumPy; string and binary
columns are dictionary-encoded and each *distinct* value is hashed once with xxh64 of its UTF-8
bytes; nulls hash to a fixed constant.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from spark_stream_sched.errors import ConfigError

_NULL_HASH = np.uint64(0x9E3779B97F4A7C15)
_SEED = np.uint64(0x5851F42D4C957F2D)


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
        uniques = encoded.dictionary.to_pylist()
        table = np.array([xxhash.xxh64_intdigest(u.encode() if isinstance(u, str) else u)
                          for u in uniques], dtype=np.uint64)
        indices = encoded.indices.fill_null(0).to_numpy().astype(np.int64)
        hashes = table[indices] if len(table) else np.zeros(len(array), np.uint64)
    elif pa.types.is_floating(kind):
        values = array.cast(pa.float64()).fill_null(0.0).to_numpy().copy()
        values[values == 0.0] = 0.0  # -0.0 and 0.0 are one key
        values[np.isnan(values)] = np.nan
        hashes = _splitmix64(values.view(np.int64))
    elif pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_temporal(kind):
        values = array.cast(pa.int64()).fill_null(0).to_numpy()
        hashes = _splitmix64(values)
    else:
        raise ConfigError(f"key columns of type {kind} are not supported; use integers, "
                          f"floats, booleans, timestamps or strings")
    if array.null_count:
        hashes = np.where(array.is_null().to_numpy(zero_copy_only=False), _NULL_HASH, hashes)
    return hashes


def key_hash(table: pa.Table, key_columns: list[str]) -> np.ndarray:
    """Stable 64-bit hash of each row's key (the same in every process and on every run)."""
    h = np.full(table.num_rows, _SEED, dtype=np.uint64)
    for name in key_columns:
        h = _splitmix64(h ^ _column_hash(table.column(name)))
    return h


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
