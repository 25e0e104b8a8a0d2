"""Runs: the closed windows of one emit, cut into pieces combined within a memory bound.

Windows ``k_lo .. k_hi`` close together; they are combined in *runs* of consecutive windows,
each started at a window that holds data (empty stretches between runs are skipped, so work and
memory depend on the panes present, never on the event-time span they cover). A run is combined
one of two ways, each bounded whatever the window and slide:

* **dense** (:func:`.dense_combine.combine_dense`): the run's partials on a ``[pane, key]``
  grid of ``((n - 1) * S/P + W/P) x keys`` cells for ``n`` windows, at most
  :data:`~.dense_combine.MAX_CELLS`;
  its passes cost a constant per cell, whatever ``W/P``. Possible when one window's grid,
  ``W/P x keys``, fits.
* **expanded** (:func:`.panes.expand_to_windows`): each partial row repeated once per window of
  the run that holds its pane; a run repeats at most :data:`MAX_EXPANDED` rows, or the rows of
  one window when a window alone holds more (those are state already).

``auto`` takes the grid when it has at most :data:`DENSE_FACTOR` cells per repeated row (the
passes over a cell are cheaper than hashing a repeated row); ``dense`` whenever it fits;
``sparse`` never. The expansion repeats every partial row once per window that holds it, up to
``W/S`` times, so its time grows with ``W/S`` (docs/aggregates.md, "Cost").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from spark_stream_sched.runtime.window.dense_combine import MAX_CELLS
from spark_stream_sched.runtime.window.spec import WindowSpec

#: Most partial rows an expanded run repeats (unless one window alone holds more).
MAX_EXPANDED = 1 << 20
#: ``auto`` combines a run densely when its grid has at most this many cells per repeated row.
DENSE_FACTOR = 2


class Run(NamedTuple):
    """Windows ``lo .. hi`` (inclusive), combined on a grid (``dense``) or by expansion."""

    lo: int
    hi: int
    dense: bool


def plan_runs(spec: WindowSpec, pane: np.ndarray, k_lo: int, k_hi: int, n_keys: int,
              mode: str) -> list[Run]:
    """The runs that cover every window in ``k_lo .. k_hi`` holding one of the sorted ``pane``.

    ``n_keys``: the distinct keys of the partials (bounds every grid); ``mode``: ``auto``,
    ``dense`` or ``sparse`` (``dense`` also when the dense path cannot fold the aggregates is
    the caller's to avoid: pass ``sparse``).
    """
    if k_hi < k_lo:
        return []
    starts, ends = windows_with_data(spec, pane, k_lo, k_hi)
    expanded_length = max(1, MAX_EXPANDED // max_rows_in_window(spec, pane))
    dense_length = 0 if mode == "sparse" else dense_run_length(spec, n_keys)
    if not dense_length:
        return [Run(lo, hi, False) for lo, hi in cut(starts, ends, expanded_length)]
    runs = []
    for lo, hi in cut(starts, ends, dense_length):
        if mode == "dense" or _cells(spec, lo, hi, n_keys) <= DENSE_FACTOR * repeated_rows(
                spec, pane, lo, hi):
            runs.append(Run(lo, hi, True))
            continue
        inner = _clipped(starts, ends, lo, hi)
        runs += [Run(a, b, False) for a, b in cut(*inner, expanded_length)]
    return runs


def cut(starts: np.ndarray, ends: np.ndarray, n: int) -> list[tuple[int, int]]:
    """Runs of at most ``n`` windows covering the sorted, disjoint intervals ``starts..ends``.

    A run starts at an interval's window; a run may span the gap to the next interval when it
    is shorter than the rest of the run (empty windows give no output).
    """
    runs: list[tuple[int, int]] = []
    if not len(starts):
        return runs
    last = int(ends[-1])
    lo = int(starts[0])
    while lo <= last:
        hi = min(last, lo + n - 1)
        runs.append((lo, hi))
        i = int(np.searchsorted(ends, hi + 1, side="left"))  # first interval ending later
        if i == len(ends):
            break
        lo = max(hi + 1, int(starts[i]))
    return runs


def windows_with_data(spec: WindowSpec, pane: np.ndarray, k_lo: int,
                      k_hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows in ``k_lo..k_hi`` that contain one of the (sorted) panes.

    Returns the starts and ends (inclusive) of disjoint, sorted, non-adjacent intervals.
    """
    k_first, k_last = spec.window_range_of_pane(_distinct(pane))
    k_first, k_last = np.maximum(k_first, k_lo), np.minimum(k_last, k_hi)
    keep = k_first <= k_last
    k_first, k_last = k_first[keep], k_last[keep]
    if len(k_first) == 0:
        return k_first, k_last
    # Both bounds grow with the pane, so an interval overlaps or touches the previous one
    # exactly when it starts at most one window after the previous one ends.
    new = np.r_[True, k_first[1:] > k_last[:-1] + 1]
    last_of_group = np.r_[new[1:], True]
    return k_first[new], k_last[last_of_group]


def max_rows_in_window(spec: WindowSpec, pane: np.ndarray) -> int:
    """At least the most partial rows (of the sorted ``pane``) any one window holds.

    The rows of a window lie within ``W/P`` panes from its first pane with data, so the most
    rows within ``W/P`` panes from any pane present bounds every window.
    """
    if not len(pane):
        return 1
    width = spec.size_ms // spec.pane_ms
    first = _distinct(pane)
    counts = np.searchsorted(pane, first + width) - np.searchsorted(pane, first)
    return max(1, int(counts.max()))


def dense_run_length(spec: WindowSpec, n_keys: int) -> int:
    """Most windows of a dense run whose grid stays within MAX_CELLS (0: not one window)."""
    slide_panes = spec.slide_ms // spec.pane_ms
    width = spec.size_ms // spec.pane_ms
    panes = MAX_CELLS // max(1, n_keys)
    return 0 if panes < width else (panes - width) // slide_panes + 1


def repeated_rows(spec: WindowSpec, pane: np.ndarray, lo: int, hi: int) -> int:
    """Rows the expansion of windows ``lo .. hi`` makes from the sorted partial ``pane``."""
    slide_panes = spec.slide_ms // spec.pane_ms
    width = spec.size_ms // spec.pane_ms
    a, b = np.searchsorted(pane, [lo * slide_panes, hi * slide_panes + width], side="left")
    k_first, k_last = spec.window_range_of_pane(pane[a:b])
    return int(np.maximum(np.minimum(k_last, hi) - np.maximum(k_first, lo) + 1, 0).sum())


def _cells(spec: WindowSpec, lo: int, hi: int, n_keys: int) -> int:
    """Cells of the grid of windows ``lo .. hi``."""
    slide_panes = spec.slide_ms // spec.pane_ms
    return ((hi - lo) * slide_panes + spec.size_ms // spec.pane_ms) * max(1, n_keys)


def _clipped(starts: np.ndarray, ends: np.ndarray, lo: int,
             hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The intervals' parts within ``lo .. hi``."""
    i, j = int(np.searchsorted(ends, lo, side="left")), int(np.searchsorted(starts, hi, "right"))
    return np.maximum(starts[i:j], lo), np.minimum(ends[i:j], hi)


def _distinct(pane: np.ndarray) -> np.ndarray:
    """The distinct values of the sorted ``pane``."""
    return pane[np.r_[True, pane[1:] != pane[:-1]]]
