"""Exact partial sums as Arrow columns: window pane partials and running-sum state.

A partial of :class:`~spark_stream_sched.runtime.exact_sum.ExactSums` is stored as one value of
:data:`PARTIAL_TYPE`, so that tables of partials concatenate, slice, ``take`` and go through
Arrow IPC snapshots like any other column (no pickle)::

    struct<flags: uint8, low: int16, digits: list<uint32>>

* ``flags``: :data:`~.exact_sum.NAN`, :data:`~.exact_sum.POS_INF`, :data:`~.exact_sum.NEG_INF`
  seen, and :data:`NEGATIVE` when the finite part is negative;
* ``digits``: the magnitude of the finite part in 32-bit limbs, least significant first, with
  no zero limb at either end (an exact zero has none), so one value has one encoding whatever
  grouping produced it; ``low``: the absolute limb index of ``digits[0]``;
* a null partial: no non-null value was seen (the aggregate is null).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.aggregates import BoundAggregate
from spark_stream_sched.runtime.exact_sum import ExactSums

#: Flag of a partial whose finite part is negative (the others are those of ``ExactSums``).
NEGATIVE = 8
PARTIAL_TYPE = pa.struct([pa.field("flags", pa.uint8()), pa.field("low", pa.int16()),
                          pa.field("digits", pa.list_(pa.uint32()))])


def _valid(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def is_exact(agg: BoundAggregate) -> bool:
    """True for ``sum``/``avg`` of a floating column (an exact partial, not an int64 sum)."""
    return agg.spec.func in ("sum", "avg") and agg.input_type is not None and (
        pa.types.is_floating(agg.input_type))


def to_arrow(sums: ExactSums, valid: np.ndarray | None = None) -> pa.StructArray:
    """``sums`` as a :data:`PARTIAL_TYPE` array, null where ``valid`` is False."""
    digits, negative = sums.magnitudes()
    n, g = digits.shape
    nonzero = digits != 0
    first = np.argmax(nonzero, axis=0)
    last = n - 1 - np.argmax(nonzero[::-1], axis=0)
    length = np.where(nonzero.any(axis=0), last - first + 1, 0)
    limb = np.arange(n)[:, None]
    keep = (limb >= first) & (limb < first + length)
    offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets),
                                     pa.array(digits.T[keep.T].astype(np.uint32)))
    flags = sums.special | np.where(negative, NEGATIVE, 0).astype(np.uint8)
    low = np.where(length > 0, sums.low + first, 0).astype(np.int16)
    mask = None if valid is None else pa.array(~np.asarray(valid, dtype=bool))
    return pa.StructArray.from_arrays([pa.array(flags), pa.array(low), lists],
                                      fields=list(PARTIAL_TYPE), mask=mask)


def from_arrow(column: pa.Array | pa.ChunkedArray) -> ExactSums:
    """The sums of a :data:`PARTIAL_TYPE` column (a null partial is an empty sum)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    flags_a, low_a, digits_a = array.flatten()  # children with the struct's nulls applied
    g = len(array)
    flags = flags_a.fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint8)
    low = low_a.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    length = digits_a.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)
    length = length.astype(np.int64)
    values = digits_a.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    special = flags & np.uint8(NEGATIVE - 1)
    if not len(values):
        return ExactSums(0, np.zeros((1, g), np.int64), special)
    used = length > 0
    base = int(low[used].min())
    n = int((low + length)[used].max()) - base + 1  # one limb of headroom
    row = np.repeat(np.arange(g), length)
    starts = np.cumsum(length) - length
    limb = np.arange(len(values)) - starts[row] + low[row] - base
    limbs = np.zeros((n, g), np.int64)
    limbs[limb, row] = np.where((flags[row] & NEGATIVE) != 0, -values, values)
    return ExactSums(base, limbs, special)


def partials(values: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
             select: np.ndarray | None = None) -> pa.StructArray:
    """Exact partial of the non-null ``values`` of each group; null for a group without any.

    ``group`` gives each value's group in ``[0, groups)``; ``select`` (default: all) lists the
    groups to return, in order.
    """
    valid = _valid(values)
    numbers = values.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
    sums = ExactSums.of_values(numbers[valid], group[valid], groups)
    seen = np.bincount(group[valid], minlength=groups) > 0
    if select is not None:
        sums, seen = sums.take(select), seen[select]
    return to_arrow(sums, seen)


def totals(column: pa.ChunkedArray | pa.Array, group: np.ndarray,
           groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge the partials of ``column`` into ``groups`` (``group`` per row) and round.

    Returns the exactly rounded sums and whether each group had a non-null partial.
    """
    seen = np.bincount(group[_valid(column)], minlength=groups) > 0
    return from_arrow(column).merge(group, groups).to_double(), seen
