"""Pane sums as two exact doubles: the fast form of exact partials, limbs as the fallback.

A *pane sum* is one value of :data:`PANE_SUM_TYPE`::

    struct<hi: float64, lo: float64, hi_grid: int16, lo_grid: int16, rest: PARTIAL_TYPE>

Its exact value is ``hi + lo + rest`` (real addition; a null ``rest`` is 0). ``hi`` is an
integer multiple of ``2**(hi_grid - 1074)`` and ``lo`` of ``2**(lo_grid - 1074)``; a null pane
sum saw no non-null value. :func:`pane_sums` writes the fast form when it can and the exact
partial of :mod:`.exact_partials` in ``rest`` (``hi = lo = 0``) when it cannot; the rounding rule
(``docs/aggregates.md``) is the same either way.

Why it is exact. Doubles that are all multiples of ``2**q`` and whose absolute values add up to
at most ``2**(q + 53)`` add up exactly in float64 in any order and grouping: every partial sum
is such a multiple below ``2**(q + 53)``, hence a double. Each value ``v`` is split without
error into ``hi = (v + C) - C`` (``C = 1.5 * 2**(s + 52)``, so ``hi`` is ``v`` rounded to a
multiple of ``2**s``) and ``lo = v - hi`` (a multiple of the block's smallest ulp, below
``2**(s - 1)``); ``s`` is chosen so that both sums per group are exact, with equal headroom
left for windows, which :func:`window_sums` checks again before adding pane sums in float64.
A window's ``H + L`` (both exact) is then one IEEE addition: the nearest double to the exact
sum, ties to even, ``+0.0`` for an exact zero, ``±inf`` past the largest double.

Pane sums live only in memory: :func:`stored` turns them into exact partials for snapshots
(the on-disk layout is :data:`~.exact_partials.PARTIAL_TYPE`) and :func:`loaded` back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime import exact_partials
from spark_stream_sched.runtime.exact_partials import PARTIAL_TYPE
from spark_stream_sched.runtime.exact_sum import ExactSums, concat

__all__ = ["PANE_SUM_TYPE", "loaded", "pane_sums", "stored", "to_sums", "totals", "window_sums"]

PANE_SUM_TYPE = pa.struct([pa.field("hi", pa.float64()), pa.field("lo", pa.float64()),
                           pa.field("hi_grid", pa.int16()), pa.field("lo_grid", pa.int16()),
                           pa.field("rest", PARTIAL_TYPE)])
#: Highest split position whose ``C`` and sums stay below the largest double.
_MAX_POSITION = 2044


def _position(value: float) -> int:
    """Grid position of the lowest bit of a double of magnitude ``value`` (as exact_digits)."""
    return max((int(np.float64(value).view(np.int64)) >> 52) - 1, 0)


def _split_position(values: np.ndarray, most: int) -> tuple[int, int] | None:
    """Split position ``s`` and lowest position ``low`` of ``values``; None: no fast form.

    Values are below ``2**(high - 1074)`` and multiples of ``2**(low - 1074)``; with at most
    ``most <= 2**c`` values per group, the ``hi`` sums are exact when ``s >= high + c - 53`` and
    the ``lo`` sums when ``s <= low + 54 - c``. ``s`` is the middle of that range (the headroom
    for windows is the same on both sides) and must keep ``|v| < 2**(s + 51)``. A NaN or an
    infinity gives None; zeros alone sit on the highest grid (0 is a multiple of anything).
    """
    if not len(values):
        return _MAX_POSITION, _MAX_POSITION
    top, bottom = float(values.max()), float(values.min())
    largest = max(top, -bottom)
    if not np.isfinite(largest):  # max() and min() propagate a NaN
        return None
    if largest == 0.0:
        return _MAX_POSITION, _MAX_POSITION
    low = _position(_smallest_magnitude(values, top, bottom, largest))
    high = _position(largest) + 53
    c = max(most - 1, 0).bit_length()
    least, greatest = high + c - 53, low + 54 - c
    s = (least + greatest) // 2
    if s > greatest or s < high - 51 or s > _MAX_POSITION:
        return None
    return s, low


def _smallest_magnitude(values: np.ndarray, top: float, bottom: float, largest: float) -> float:
    """The least non-zero ``|v|`` of ``values`` (one of which is not zero)."""
    if bottom > 0.0:
        return bottom
    if top < 0.0:
        return -top
    magnitude = np.abs(values)
    return float(np.min(magnitude, where=magnitude > 0.0, initial=largest))


def pane_sums(values: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
              pick: np.ndarray | None = None,
              count: np.ndarray | None = None) -> pa.StructArray:
    """The pane sum of the non-null ``values`` of each group; null for a group without any.

    ``group`` gives each value's group in ``[0, groups)``; ``pick`` lists the groups to return,
    distinct and in that order, and must hold every group with a value (default: all);
    ``count``, if given, is ``np.bincount(group, minlength=groups)`` (nulls included). The
    fast form needs finite values whose span and count per group leave a split
    (:func:`_split_position`); else every group gets its exact partial.
    """
    numbers = values.cast(pa.float64())
    if numbers.null_count:
        valid = np.asarray(numbers.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        numbers, group = _numbers(numbers)[valid], group[valid]
        count = None
    else:
        numbers = _numbers(numbers)
    count = np.bincount(group, minlength=groups) if count is None else count
    pick = np.arange(groups) if pick is None else pick
    seen = count[pick] > 0
    split = _split_position(numbers, int(count.max(initial=0)))
    if split is None:
        rank = np.zeros(groups, np.int64)
        rank[pick] = np.arange(len(pick))
        partial = ExactSums.of_values(numbers, rank[group], len(pick))
        return _rest_only(exact_partials.to_arrow(partial, seen))
    hi, lo = _halves(numbers, split[0])
    n = len(pick)
    return pa.StructArray.from_arrays(
        [pa.array(_group_sums(group, hi, groups)[pick]),
         pa.array(_group_sums(group, lo, groups)[pick]),
         pa.array(np.full(n, split[0], np.int16)), pa.array(np.full(n, split[1], np.int16)),
         pa.nulls(n, PARTIAL_TYPE)],
        fields=list(PANE_SUM_TYPE), mask=None if seen.all() else pa.array(~seen))


def _numbers(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A float64 column as one NumPy array (nulls as 0)."""
    filled = values.fill_null(0) if values.null_count else values
    out: np.ndarray = filled.to_numpy(zero_copy_only=False)
    return out


def _group_sums(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Float64 sums per group (``np.bincount`` gives int64 zeros for no values)."""
    out: np.ndarray = np.bincount(group, weights=values, minlength=groups)
    return out.astype(np.float64, copy=False)


def _halves(numbers: np.ndarray, s: int) -> tuple[np.ndarray, np.ndarray]:
    """``hi`` (``numbers`` rounded to multiples of ``2**(s - 1074)``) and ``lo = v - hi``, exact."""
    c = np.ldexp(1.5, s + 52 - 1074)
    hi = numbers + c
    hi -= c
    lo = np.subtract(numbers, hi)
    return hi, lo


def _rest_only(partial: pa.StructArray) -> pa.StructArray:
    """Exact partials as pane sums (``hi = lo = 0``), nulls kept."""
    n = len(partial)
    zeros, grid = pa.array(np.zeros(n)), pa.array(np.zeros(n, np.int16))
    mask = None if not partial.null_count else partial.is_null()
    return pa.StructArray.from_arrays([zeros, zeros, grid, grid, partial],
                                      fields=list(PANE_SUM_TYPE), mask=mask)


#: ``hi``, ``lo``, ``hi_grid``, ``lo_grid`` of pane sums and whether any ``rest`` is used.
_Fields = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]


def _fields(column: pa.ChunkedArray | pa.Array) -> _Fields:
    """``hi``, ``lo``, ``hi_grid``, ``lo_grid`` of a pane-sum column, and whether rest is used.

    A null pane sum reads as ``hi = lo = 0`` on the highest grid (it adds nothing).
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_chunk_fields(c) for c in chunks if len(c)]
    if not parts:
        return np.zeros(0), np.zeros(0), np.zeros(0, np.int16), np.zeros(0, np.int16), False
    hi, lo, hi_grid, lo_grid = (np.concatenate([p[i] for p in parts]) for i in range(4))
    return hi, lo, hi_grid, lo_grid, any(p[4] for p in parts)


def _chunk_fields(chunk: pa.StructArray) -> _Fields:
    """:func:`_fields` of one chunk."""
    children = chunk.flatten()  # the children with the struct's nulls applied
    hi, lo = (children[i].fill_null(0.0).to_numpy(zero_copy_only=False) for i in (0, 1))
    hi_grid, lo_grid = (children[i].fill_null(_MAX_POSITION).to_numpy(zero_copy_only=False)
                        for i in (2, 3))
    return hi, lo, hi_grid, lo_grid, len(chunk) > children[4].null_count


def to_sums(column: pa.ChunkedArray | pa.Array) -> ExactSums:
    """The exact sums of a pane-sum or exact-partial column (a null is an empty sum)."""
    if column.type == PARTIAL_TYPE:
        return exact_partials.from_arrow(column)
    hi, lo, _, _, _ = _fields(column)
    n = len(hi)
    if not n:
        return ExactSums.zeros(0)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    rest = exact_partials.from_arrow(pa.chunked_array([c.flatten()[4] for c in chunks],
                                                      PARTIAL_TYPE))
    both = concat([ExactSums.of_each(hi), ExactSums.of_each(lo), rest])
    return both.merge(np.tile(np.arange(n), 3), n)


def window_sums(column: pa.ChunkedArray | pa.Array, total: Callable[[np.ndarray], np.ndarray],
                terms: int) -> np.ndarray:
    """The exactly rounded sum of each window of pane sums.

    ``total`` maps one value per pane sum (float64 or int64) to one sum per window, as
    :meth:`.ExactSums.summed` requires, adding at most ``terms`` pane sums into any partial
    result (a prefix sum over ``terms`` panes). The fast form is added in float64 when both
    halves stay exact (see the module docstring), else every pane sum goes to limbs.
    """
    hi, lo, hi_grid, lo_grid, rest = _fields(column)
    if not rest and _exact(hi, hi_grid, terms) and _exact(lo, lo_grid, terms):
        return _rounded(total(hi), total(lo))
    out: np.ndarray = to_sums(column).summed(total).to_double()
    return out


def _rounded(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """``hi + lo`` of exact sums: one IEEE addition; ``+ 0.0`` makes an exact zero ``+0.0``."""
    out: np.ndarray = np.add(hi, lo)
    out += 0.0
    return out


def _exact(parts: np.ndarray, grid: np.ndarray, terms: int) -> bool:
    """True when any sums of ``terms`` of ``parts`` are exact in float64 (see the docstring).

    ``terms * max|part|`` is computed in float64, rounded up at worst to the power of two it
    is compared with, so a strict ``<`` is a proof.
    """
    if not len(parts):
        return True
    q = int(grid.min())
    largest = max(float(parts.max()), -float(parts.min()))
    return bool(terms * largest < np.ldexp(1.0, q + 53 - 1074))


def totals(column: pa.ChunkedArray | pa.Array, group: np.ndarray, groups: int,
           rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`.exact_partials.totals` for a pane-sum or exact-partial column.

    The fast form is added per group in float64 when both halves stay exact, else by limbs.
    """
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    seen = np.bincount(group[valid if rows is None else valid[rows]], minlength=groups) > 0
    if column.type == PANE_SUM_TYPE:
        hi, lo, hi_grid, lo_grid, rest = _fields(column)
        if rows is not None:
            hi, lo, hi_grid, lo_grid = hi[rows], lo[rows], hi_grid[rows], lo_grid[rows]
        terms = int(np.bincount(group, minlength=groups).max(initial=0))
        if not rest and _exact(hi, hi_grid, terms) and _exact(lo, lo_grid, terms):
            return _rounded(_group_sums(group, hi, groups), _group_sums(group, lo, groups)), seen
    return to_sums(column).merge(group, groups, rows).to_double(), seen


def stored(table: pa.Table) -> pa.Table:
    """``table`` with every pane-sum column as exact partials (the layout snapshots keep)."""
    for i, field in enumerate(table.schema):
        if field.type == PANE_SUM_TYPE:
            column = table.column(i)
            valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            partial = exact_partials.to_arrow(to_sums(column), valid)
            table = table.set_column(i, field.name, partial)
    return table


def loaded(table: pa.Table) -> pa.Table:
    """``table`` with every exact-partial column as pane sums (the inverse of :func:`stored`)."""
    for i, field in enumerate(table.schema):
        if field.type == PARTIAL_TYPE:
            column = table.column(i).combine_chunks()
            table = table.set_column(i, field.name, _rest_only(column))
    return table
