"""Window specifications: epoch-aligned time-based sliding windows and their panes.

Window ``k`` covers ``[k*S, k*S + W)`` for size ``W`` and slide ``S`` (tumbling when ``S == W``),
aligned to the epoch as in Gulisano et al. (2016), §2. Time is cut into *panes* of ``P = gcd(W, S)``
milliseconds: every window is the union of ``W/P`` consecutive panes and every tuple falls in
exactly one pane, so per-pane partial aggregates computed once can be combined into each window
(the winset of Gulisano et al. (2016), §2 is the set of windows of one ``k``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.durations import MAX_DURATION_MS, format_duration, parse_duration

__all__ = ["MAX_DURATION_MS", "MAX_WINDOWS_PER_ROW", "WindowSpec", "floor_div", "parse_duration"]

#: Most windows one row may fall in (``ceil(W/S)``). Each is a result row, and the windows of
#: one row can close in one batch, whose results are held together: above this, one row's
#: results alone (about 50 bytes each) pass 0.5 GB per key. Combining windows is bounded
#: whatever ``W/S`` (:mod:`.runs`); this bounds what it must return.
MAX_WINDOWS_PER_ROW = 10_000_000


def floor_div(a: np.ndarray | int, b: int) -> np.ndarray | int:
    """Floor division that keeps times before the epoch in the right window."""
    return np.floor_divide(a, b) if isinstance(a, np.ndarray) else a // b


@dataclass(frozen=True)
class WindowSpec:
    """Sliding window of ``size_ms`` advancing by ``slide_ms`` (tumbling when equal)."""

    size_ms: int
    slide_ms: int

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.slide_ms <= 0:
            raise ConfigError(f"window size and slide must be positive, got "
                              f"{self.size_ms} ms / {self.slide_ms} ms")
        if self.size_ms > MAX_DURATION_MS:
            raise ConfigError(f"window size {self.size_ms} ms is longer than the supported "
                              f"event-time span of {MAX_DURATION_MS} ms (years 0001..9999)")
        if self.slide_ms > self.size_ms:
            raise ConfigError(f"slide ({self.slide_ms} ms) must not exceed the window size "
                              f"({self.size_ms} ms): tuples between windows would be lost")
        per_row = -(-self.size_ms // self.slide_ms)
        if per_row > MAX_WINDOWS_PER_ROW:
            shortest = format_duration(-(-self.size_ms // MAX_WINDOWS_PER_ROW))
            raise ConfigError(
                f"window {format_duration(self.size_ms)} sliding by "
                f"{format_duration(self.slide_ms)} puts every row in {per_row:,} windows, each a "
                f"result row; at most {MAX_WINDOWS_PER_ROW:,} windows per row are supported "
                f"(one row's results would pass 0.5 GB per key); set slide to {shortest} or more")

    @classmethod
    def parse(cls, size: str | int, slide: str | int | None = None) -> WindowSpec:
        """Build from duration strings; ``slide`` defaults to ``size`` (tumbling)."""
        size_ms = parse_duration(size, "window size")
        slide_ms = size_ms if slide is None else parse_duration(slide, "window slide")
        return cls(size_ms, slide_ms)

    @property
    def pane_ms(self) -> int:
        """Pane length ``P = gcd(W, S)``."""
        return math.gcd(self.size_ms, self.slide_ms)

    def window_range_of_pane(self, pane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First and last window index ``k`` that contain each pane (inclusive)."""
        start = pane * self.pane_ms
        k_last = np.floor_divide(start, self.slide_ms)
        k_first = -np.floor_divide(-(start + self.pane_ms - self.size_ms), self.slide_ms)
        return k_first, k_last

    def last_closed_window(self, bound: int) -> int:
        """Index of the last window whose end is ``<= bound`` (closed by ready bound ``bound``)."""
        return (bound - self.size_ms) // self.slide_ms

    def windows_of(self, ts: int) -> range:
        """Indices of the windows that contain event time ``ts`` (the reference's definition)."""
        first = -((-(ts - self.size_ms + 1)) // self.slide_ms)
        return range(first, ts // self.slide_ms + 1)
