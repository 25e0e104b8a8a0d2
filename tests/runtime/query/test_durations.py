"""The one duration grammar (Spark interval strings): accepted and refused forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.durations import (
    MAX_DURATION_MS,
    format_duration,
    parse_duration,
)


@pytest.mark.parametrize(("text", "ms"), [
    ("30 seconds", 30_000), ("30s", 30_000), ("30 second", 30_000), ("30sec", 30_000),
    ("interval 30 seconds", 30_000), ("INTERVAL 30 SECONDS", 30_000),
    ("1 week", 604_800_000), ("2 weeks", 1_209_600_000), ("500 milliseconds", 500),
    ("500ms", 500), ("1 minute 30 seconds", 90_000), ("1m 30s", 90_000),
    ("2 hours", 7_200_000), ("1h", 3_600_000), ("3 days", 259_200_000), ("1.5 seconds", 1500),
    ("2000 microseconds", 2), ("  10 minutes  ", 600_000),
])
def test_accepted_forms(text: str, ms: int) -> None:
    assert parse_duration(text, "window") == ms


def test_an_int_is_milliseconds_the_programmatic_form() -> None:
    assert parse_duration(250) == 250


@pytest.mark.parametrize(("text", "message"), [
    ("30", r"window '30' has no unit; write 30 seconds, 30s or 30 milliseconds .* a bare "
           r"number is not accepted"),
    ("1.5", r"window '1.5' has no unit"),
    ("thirty seconds", r"window 'thirty seconds' is not a duration; use e\.g\. '30 seconds'"),
    ("30 parsecs", r"window '30 parsecs' is not a duration: unknown unit 'parsecs'"),
    ("1 month", r"window '1 month': months and years have no fixed length; use days or weeks"),
    ("2 years", r"months and years have no fixed length"),
    ("1500 microseconds", r"window '1500 microseconds' is not a whole number of milliseconds"),
    ("0 seconds", r"window must be positive, got '0 seconds'"),
    ("-5s", r"window '-5s' is not a duration"),
    ("", r"window '' is not a duration"),
    ("interval", r"window 'interval' is not a duration"),
    ("3652500 days", r"longer than the supported event-time span of 315537897600000 ms"),
])
def test_refused_forms_say_why(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_duration(text, "window")


@given(st.integers(1, MAX_DURATION_MS))
def test_format_duration_parses_back(ms: int) -> None:
    assert parse_duration(format_duration(ms)) == ms
