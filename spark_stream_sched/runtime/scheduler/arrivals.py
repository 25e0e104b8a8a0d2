"""Arrival schedules for the simulator: external tuples per input stream and time unit.

File format (JSON)::

    {"s1": {"1": 1, "3": 1, "10": 1}, "s2": {"2": 1, "3": 1}}

or, per stream, a list whose position is the time unit (``{"s1": [0, 1, 0, 1]}``). Counts may be
fractional (the fluid model). Tuples arriving at time ``t`` can be processed from time unit ``t +
1`` on (Jiang & Chakravarthy 2003, Table 2: the tuple arriving at time 1 is still queued at time 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.io import read_document, suggest

#: Arrivals: stream name -> time unit -> number of tuples.
Arrivals = Mapping[str, Mapping[int, float]]


def load_arrivals(path: str | Path) -> dict[str, dict[int, float]]:
    """Load an arrivals file (see the module docstring); :class:`ConfigError` when malformed."""
    doc = read_document(path)
    try:
        return arrivals_from_dict(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def arrivals_from_dict(doc: Mapping[str, Any]) -> dict[str, dict[int, float]]:
    """Normalise a parsed arrivals document to ``{stream: {time: count}}``."""
    out: dict[str, dict[int, float]] = {}
    for stream, per_time in doc.items():
        if isinstance(per_time, list):
            per_time = dict(enumerate(per_time))
        if not isinstance(per_time, Mapping):
            raise ConfigError(f"arrivals of stream {stream!r} must be an object or a list")
        out[str(stream)] = {
            _time(stream, t): _count(stream, t, c) for t, c in per_time.items() if c != 0
        }
    return out


def _time(stream: str, t: Any) -> int:
    try:
        value = int(t)
    except (TypeError, ValueError):
        raise ConfigError(f"stream {stream!r}: time {t!r} is not an integer") from None
    if value < 0 or str(value) != str(t).strip():
        raise ConfigError(f"stream {stream!r}: time {t!r} must be an integer >= 0")
    return value


def _count(stream: str, t: Any, c: Any) -> float:
    if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c < 0:
        raise ConfigError(f"stream {stream!r} at time {t}: count {c!r} must be a number >= 0")
    return float(c)


def check_arrivals(plan: QueryPlan, arrivals: Arrivals) -> None:
    """Raise :class:`ConfigError` when ``arrivals`` names a stream the plan does not read."""
    for stream in arrivals:
        if stream not in plan.streams:
            hint = suggest(stream, list(plan.streams))
            raise ConfigError(f"arrivals name stream {stream!r}, which no operator reads{hint}")
