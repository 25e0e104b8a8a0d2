"""Durations in Spark's interval syntax: the one parser for windows, slides and timeouts.

Accepted (case-insensitive; the same strings Spark's ``window()`` and ``withWatermark`` take)::

    30 seconds    30s    interval 30 seconds    1 week    500 milliseconds    500ms
    1 minute 30 seconds    1.5 seconds    2 hours    3 days

Units: ``week``, ``day``, ``hour``, ``minute``, ``second``, ``millisecond``, ``microsecond``
(singular or plural) and the short forms ``w d h m s ms us`` (plus ``min``, ``sec``, ``msec``,
``hr``). A bare number (``30``) is refused: it used to mean milliseconds, which nobody guessed.
Months and years are refused (they have no fixed length). The result is a whole, positive number
of milliseconds no longer than :data:`MAX_DURATION_MS`, the supported event-time span.
Python ``int`` values (not strings) are taken as milliseconds: the programmatic form.
"""

from __future__ import annotations

import re
from fractions import Fraction

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.packets import EVENT_TIME_SPAN

#: Longest window, slide or other duration: the whole supported event-time range. Together with
#: the range check on event times this keeps every window end ``k*S + W`` far inside int64.
MAX_DURATION_MS = EVENT_TIME_SPAN

_UNIT_MS: dict[str, Fraction] = {}
for _names, _ms in (
    (("us", "microsecond", "microseconds"), Fraction(1, 1000)),
    (("ms", "msec", "msecs", "millisecond", "milliseconds"), Fraction(1)),
    (("s", "sec", "secs", "second", "seconds"), Fraction(1000)),
    (("m", "min", "mins", "minute", "minutes"), Fraction(60_000)),
    (("h", "hr", "hrs", "hour", "hours"), Fraction(3_600_000)),
    (("d", "day", "days"), Fraction(86_400_000)),
    (("w", "week", "weeks"), Fraction(604_800_000)),
):
    _UNIT_MS.update(dict.fromkeys(_names, _ms))
_NO_FIXED_LENGTH = ("month", "months", "mon", "mons", "year", "years", "y")
_TERM = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_GRAMMAR = re.compile(r"(?:interval\s+)?(?:\d+(?:\.\d+)?\s*[a-z]+\s*)+")
_EXAMPLES = "e.g. '30 seconds', '30s', '500 milliseconds', '1 minute 30 seconds' or '1 week'"
#: Units used by :func:`format_duration`, largest first.
_FORMAT_UNITS = ((604_800_000, "week"), (86_400_000, "day"), (3_600_000, "hour"),
                 (60_000, "minute"), (1000, "second"), (1, "millisecond"))


def parse_duration(text: str | int, what: str = "duration") -> int:
    """Parse a Spark interval string (or an ``int`` of milliseconds) into milliseconds.

    Raises
    ------
    ConfigError
        Naming ``what`` and the text: a bare number, an unknown unit, months or years, a
        fraction of a millisecond, zero, or more than :data:`MAX_DURATION_MS`.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return _checked(Fraction(text), text, what)
    raw = str(text)
    clean = raw.strip().lower()
    if re.fullmatch(r"[+-]?\d+(?:\.\d+)?", clean):
        raise ConfigError(f"{what} {raw!r} has no unit; write {clean} seconds, {clean}s or "
                          f"{clean} milliseconds ({_EXAMPLES}); a bare number is not accepted")
    if not _GRAMMAR.fullmatch(clean):
        raise ConfigError(f"{what} {raw!r} is not a duration; use {_EXAMPLES}")
    body = clean[len("interval"):] if clean.startswith("interval") else clean
    total = Fraction(0)
    for number, unit in _TERM.findall(body):
        if unit in _NO_FIXED_LENGTH:
            raise ConfigError(f"{what} {raw!r}: months and years have no fixed length; "
                              f"use days or weeks")
        if unit not in _UNIT_MS:
            raise ConfigError(f"{what} {raw!r} is not a duration: unknown unit {unit!r}; "
                              f"use {_EXAMPLES}")
        total += Fraction(number) * _UNIT_MS[unit]
    return _checked(total, raw, what)


def _checked(total: Fraction, text: str | int, what: str) -> int:
    """``total`` ms as an int in ``1 .. MAX_DURATION_MS`` (ConfigError otherwise)."""
    if total.denominator != 1:
        raise ConfigError(f"{what} {text!r} is not a whole number of milliseconds; event "
                          f"times have millisecond resolution")
    if total <= 0:
        raise ConfigError(f"{what} must be positive, got {text!r}")
    if total > MAX_DURATION_MS:
        raise ConfigError(f"{what} {text!r} is {total} ms, longer than the supported event-time "
                          f"span of {MAX_DURATION_MS} ms (years 0001..9999); use a shorter "
                          f"duration")
    return int(total)


def format_duration(ms: int) -> str:
    """Spell ``ms`` in the grammar above, largest unit first (``90000``: ``1 minute 30 seconds``).

    ``parse_duration(format_duration(ms)) == ms`` for every positive ``ms``.
    """
    parts = []
    rest = ms
    for unit_ms, name in _FORMAT_UNITS:
        count, rest = divmod(rest, unit_ms)
        if count:
            parts.append(f"{count} {name}{'s' if count != 1 else ''}")
    return " ".join(parts) if parts else "0 milliseconds"


#: Binary size units of :func:`parse_bytes` (k = 1024).
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
          "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_bytes(text: str, what: str = "budget") -> int:
    """``"64k"``, ``"1.5 MiB"``, ``"0"`` -> bytes (binary units: k = 1024)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text.lower())
    if found is None or found.group(2) not in _UNITS:
        raise ConfigError(f"{what} {text!r} is not a size; write e.g. 0, 65536, 64k or 1.5 MiB")
    return int(float(found.group(1)) * _UNITS[found.group(2)])
