"""Window specifications: epoch-aligned time-based sliding windows and their panes.

Window ``k`` covers ``[k*S, k*S + W)`` for size ``W`` and slide ``S`` (tumbling when ``S == W``),
aligned to the epoch as in seed 004 §2. Time is cut into *panes* of ``P = gcd(W, S)``
milliseconds: every window is the union of ``W/P`` consecutive panes and every tuple falls in
exactly one pane, so per-pane partial aggregates computed once can be combined into each window
(the winset of seed 004 §2 is the set of windows of one ``k``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.packets import EVENT_TIME_SPAN

#: Longest window, slide or other duration: the whole supported event-time range. Together with
#: the range check on event times this keeps every window end ``k*S + W`` far inside int64.
MAX_DURATION_MS = EVENT_TIME_SPAN

_UNITS_MS = {
    "ms": 1, "millisecond": 1, "milliseconds": 1, "msec": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000, "secs": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000, "mins": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([A-Za-z]+)?\s*$")


def parse_duration(text: str | int, what: str = "duration") -> int:
    """Parse ``"30s"``, ``"30 seconds"``, ``"500ms"``, ``"2 minutes"`` or an int (ms) into ms.

    The result is in ``1 .. MAX_DURATION_MS``; anything else (including a product that would
    overflow int64) is a :class:`ConfigError` naming ``what`` and the text.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _DURATION.match(str(text))
        unit = (match.group(2) or "ms").lower() if match else ""
        if not match or unit not in _UNITS_MS:
            raise ConfigError(f"{what} {text!r} is not a duration; use e.g. '30s', "
                              f"'30 seconds', '500ms' or '2 minutes'")
        value = int(match.group(1)) * _UNITS_MS[unit]
    if value <= 0:
        raise ConfigError(f"{what} must be positive, got {text!r}")
    if value > MAX_DURATION_MS:
        raise ConfigError(f"{what} {text!r} is {value} ms, longer than the supported event-time "
                          f"span of {MAX_DURATION_MS} ms (years 0001..9999); use a shorter "
                          f"duration")
    return value


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
