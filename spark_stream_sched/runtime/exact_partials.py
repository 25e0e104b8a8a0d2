"""Exact partial sums as Arrow columns: window pane partials and running-sum state.

A partial of :class:`~spark_stream_sched.runtime.exact_sum.ExactSums` is stored as one value of
:data:`PARTIAL_TYPE`, so that tables of partials concatenate, slice, ``take`` and go through
Arrow IPC snapshots like any other column (no pickle)::

    struct<flags: uint8, low: int16, digits: list<uint32>>

* ``flags``: :data:`~.exact_sum.NAN`, :data:`~.exact_sum.POS_INF`, :data:`~.exact_sum.NEG_INF`
  seen, and :data:`NEGATIVE` when the finite part is negative;
* ``digits``: the magnitude of the finite part in 32-bit limbs, least significant first;
  ``low``: the absolute limb index of ``digits[0]``. :func:`to_arrow` gives every partial of
  one array the same limbs (so that reading them back is a reshape); any layout reads back;
* a null partial: no non-null value was seen (the aggregate is null).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.aggregates import BoundAggregate
from spark_stream_sched.runtime.exact_sum import ExactSums, concat

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
    """``sums`` as a :data:`PARTIAL_TYPE` array, null where ``valid`` is False.

    Every partial gets the same limbs (those any of ``sums`` uses), which :func:`from_arrow`
    reads back without a scatter; a value's encoding thus depends on its neighbours, its sum
    never does.
    """
    digits, negative = sums.magnitudes()
    used = np.flatnonzero(digits.any(axis=1))
    first, width = (int(used[0]), int(used[-1] - used[0] + 1)) if len(used) else (0, 0)
    values = np.ascontiguousarray(digits[first:first + width].T).astype(np.uint32).reshape(-1)
    offsets = np.arange(sums.groups + 1, dtype=np.int32) * width
    lists = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    flags = sums.special | np.where(negative, NEGATIVE, 0).astype(np.uint8)
    low = np.full(sums.groups, sums.low + first if width else 0, np.int16)
    mask = None if valid is None else pa.array(~np.asarray(valid, dtype=bool))
    return pa.StructArray.from_arrays([pa.array(flags), pa.array(low), lists],
                                      fields=list(PARTIAL_TYPE), mask=mask)


def from_arrow(column: pa.Array | pa.ChunkedArray) -> ExactSums:
    """The sums of a :data:`PARTIAL_TYPE` column (a null partial is an empty sum)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_chunk(c) for c in chunks if len(c)]
    if not parts:
        return ExactSums.zeros(0)
    return parts[0] if len(parts) == 1 else concat(parts)


def _chunk(array: pa.StructArray) -> ExactSums:
    """One chunk of :func:`from_arrow`: a reshape when its partials share their limbs."""
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
    base, top = int(low[used].min()), int((low + length)[used].max())
    limbs = np.zeros((top - base + 1, g), np.int64)  # one limb of headroom
    if int(low[used].max()) == base and int((low + length)[used].min()) == top:
        limbs[:-1, used] = values.reshape(-1, top - base).T  # the layout to_arrow writes
    else:
        row = np.repeat(np.arange(g), length)
        limb = np.arange(len(values)) + np.repeat(low - base - (np.cumsum(length) - length),
                                                  length)
        limbs[limb, row] = values
    negative = (flags & NEGATIVE) != 0
    if negative.any():
        limbs[:, negative] *= -1
    return ExactSums.of_digits(base, limbs, special)


def partials(values: pa.ChunkedArray | pa.Array, group: np.ndarray,
             groups: int) -> pa.StructArray:
    """Exact partial of the non-null ``values`` of each group; null for a group without any.

    ``group`` gives each value's group in ``[0, groups)``.
    """
    valid = _valid(values)
    numbers = values.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False)
    if not valid.all():
        numbers, group = numbers[valid], group[valid]
    return to_arrow(ExactSums.of_values(numbers, group, groups),
                    np.bincount(group, minlength=groups) > 0)


def totals(column: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
           rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Merge the partials of ``column`` into ``groups`` and round each group once.

    Partial ``rows[i]`` (default ``i``) goes to group ``group[i]``. Returns the exactly rounded
    sums and whether each group had a non-null partial.
    """
    valid = _valid(column)
    seen = np.bincount(group[valid if rows is None else valid[rows]], minlength=groups) > 0
    return from_arrow(column).merge(group, groups, rows).to_double(), seen
