"""Order-preserving integer codes of columns: one int64 per row for a multi-column order.

:func:`lexicographic_codes` turns the values of several columns into one int64 per row whose
numeric order is the rows' lexicographic order on those columns (ascending, nulls first) and
which is equal for two rows exactly when the rows are equal on every column. Sorting or
grouping that one NumPy array replaces Arrow's multi-column sort or hash (the result order of
a batch, the dense ``[pane, key]`` grids of the window operators).

Each column gets its own code first (:func:`column_codes`): an integer-like column without
nulls is coded by its value minus the least value, divided by the values' greatest common
step (window bounds are multiples of the slide), which costs a few passes over the column; any
other column by the rank of its value among its distinct values, from Arrow's hash and a sort
of the distinct values. The codes are combined in mixed radix (the spans of the columns), and
whenever the product of the spans would leave int64, the codes combined so far (and, if still
needed, the next column's) are renumbered densely first, so the result never overflows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Codes", "column_codes", "dense_ids", "lexicographic_codes"]

#: Spans (number of possible codes) must stay below this for codes to be combined in int64.
_LIMIT = 1 << 62


def _integer_like(kind: pa.DataType) -> bool:
    """Types whose values are int64 numbers in order (uint64 is not: it may exceed int64)."""
    return bool(pa.types.is_signed_integer(kind) or pa.types.is_timestamp(kind)
                or pa.types.is_duration(kind)
                or (pa.types.is_unsigned_integer(kind) and kind.bit_width < 64))


class Codes(NamedTuple):
    """One column's codes, each in ``0 .. span-1``.

    ``ranked`` holds the distinct values in code order when the codes are ranks (dense), and
    is None when they are offsets.
    """

    codes: np.ndarray
    span: int
    ranked: pa.Array | None


def column_codes(column: pa.ChunkedArray | pa.Array, max_span: int = _LIMIT) -> Codes:
    """Codes of a column's values in ascending order (null first).

    Integer-like columns without nulls whose stepped span is at most ``max_span`` are coded by
    offset (``(value - least) // step``): codes need not be dense. Other columns are coded by
    rank among their distinct values (Arrow's order, nulls first): dense.
    """
    if _integer_like(column.type) and not column.null_count and len(column):
        numbers = np.asarray(column.cast(pa.int64()).to_numpy(), np.int64)
        low, top = int(numbers.min()), int(numbers.max())
        top -= low
        if top < 1 << 63:  # then no offset overflows int64
            offsets = numbers - low
            if top:
                step = int(np.gcd.reduce(offsets))
                if step > 1:
                    offsets //= step
                    top //= step
            if top < max_span:
                return Codes(offsets, top + 1, None)
    uniques = pc.unique(column)
    ranked = uniques.take(pc.array_sort_indices(uniques, null_placement="at_start"))
    ids = pc.index_in(column, value_set=ranked, skip_nulls=False)
    return Codes(np.asarray(ids.to_numpy(zero_copy_only=False), np.int64), len(ranked), ranked)


def _renumbered(codes: np.ndarray, span: int) -> tuple[np.ndarray, int]:
    """``codes`` renumbered ``0 .. k-1`` in the same order (k distinct codes), and k."""
    if span <= 4 * len(codes) + 4096:
        present = np.bincount(codes, minlength=span) > 0
        return (np.cumsum(present) - 1)[codes], int(np.count_nonzero(present))
    distinct, inverse = np.unique(codes, return_inverse=True)
    return np.asarray(inverse, np.int64).reshape(-1), len(distinct)


def lexicographic_codes(table: pa.Table, columns: Sequence[str], max_span: int = _LIMIT
                        ) -> tuple[np.ndarray, int]:
    """One int64 per row in the rows' lexicographic order on ``columns``, and its span.

    Codes compare as the rows do (ascending, nulls first) and are equal exactly when the rows
    are equal on every column; they lie in ``0 .. span-1`` but need not be dense. No columns:
    every row gets 0. ``max_span`` bounds an offset-coded column's span (see
    :func:`column_codes`).
    """
    if not columns:
        return np.zeros(table.num_rows, np.int64), 1
    codes, span, _ = column_codes(table.column(columns[0]), max_span)
    for name in columns[1:]:
        more, more_span, _ = column_codes(table.column(name), max_span)
        if span * more_span >= _LIMIT:
            codes, span = _renumbered(codes, span)
        if span * more_span >= _LIMIT:
            more, more_span = _renumbered(more, more_span)
        codes = codes * more_span + more
        span *= more_span
    return codes, span


def dense_ids(table: pa.Table, columns: Sequence[str]) -> tuple[np.ndarray, pa.Table]:
    """Dense ids ``0 .. k-1`` of the rows' values on ``columns``, in ascending order.

    Returns each row's id and the table of the k distinct values (of ``columns``) in id order.
    """
    n = table.num_rows
    if not columns:
        return np.zeros(n, np.int64), pa.table({})
    if len(columns) == 1:
        codes, span, ranked = column_codes(table.column(columns[0]), max_span=4 * n + 4096)
        if ranked is not None:  # ranks are dense ids already
            return codes, pa.table({columns[0]: ranked})
    else:
        codes, span = lexicographic_codes(table, columns, max_span=4 * n + 4096)
    ids, k = _renumbered(codes, span)
    # any row of an id carries its values, so whichever write wins is right
    representative = np.zeros(k, np.int64)
    representative[ids] = np.arange(n, dtype=np.int64)
    return ids, table.select(list(columns)).take(pa.array(representative))
