"""Ordered window aggregation: epoch-aligned sliding windows over panes.

The Window Hive (W-Hive) of Gulisano et al. (2016), §4, §5.6.


* :mod:`.spec` — :class:`WindowSpec`: size, slide, the pane of ``gcd(size, slide)`` and the
  window/pane arithmetic (window ``k`` covers ``[k*S, k*S + W)``).
* :mod:`.panes` — pane partials of every aggregate, computed once per pane from all of its
  tuples (Arrow hash aggregation: the sparse path).
* :mod:`.dense_panes` — the same partials on dense NumPy grids (pane x key) when the keys are
  dense enough; bit-identical to the sparse path (property-tested).
* :mod:`.dense_combine` — combining pane partials into windows on dense grids.
* :mod:`.runs` — the closed windows cut into runs, each combined on a grid or by expansion
  within a memory bound, whatever the windows per row.
* :mod:`.aggregator` — :class:`WindowAggregator`: buffers tuples, closes windows by the ready
  bound, combines them run by run, snapshots and restores its state.
"""

from __future__ import annotations

from spark_stream_sched.runtime.window.aggregator import WINDOW_END, WINDOW_START, WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec

__all__ = ["WINDOW_END", "WINDOW_START", "WindowAggregator", "WindowSpec"]
