"""The row ``max_by``/``min_by`` chooses in each group: largest (smallest) order, earliest of ties.

Shared by both stages of the window operators (tuples into pane partials, partials into
windows) and by either grid layout: rows are given in the total order ``(ts, input, seq)`` (or
partials in pane order), so "earliest" is the lowest position. The order compares as Spark
SQL's does: Arrow's ``rank`` puts ``-0.0`` and ``0.0`` on one rank and NaN above every number;
rows whose order is null take no part.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["chosen_positions"]


def chosen_positions(order: pa.Array | pa.ChunkedArray, group: np.ndarray, n_groups: int,
                     largest: bool) -> pa.Array:
    """Per group ``0 .. n_groups-1``, the position of the row ``max_by`` (``min_by``) chooses.

    ``group`` gives each row's group. The result is int64, null for a group whose rows all have
    a null order (or no rows).
    """
    if isinstance(order, pa.ChunkedArray):
        order = order.combine_chunks()
    n = len(order)
    valid = np.asarray(pc.is_valid(order).to_numpy(zero_copy_only=False), dtype=bool)
    rank = np.asarray(pc.rank(order, sort_keys="ascending", tiebreaker="dense"), np.int64)
    score = rank if largest else -rank
    groups, scores = group[valid], score[valid]
    best = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(best, groups, scores)
    ties = valid.copy()
    ties[valid] = scores == best[groups]
    first = np.full(n_groups, n, np.int64)
    np.minimum.at(first, group[ties], np.flatnonzero(ties))
    return pa.array(first, mask=first == n)
