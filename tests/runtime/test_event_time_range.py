"""Extreme event times (a reported defect): range checks and span-independent pane storage.

Event times outside Spark's timestamp range (years 0001..9999 in int64 ms) are refused where
they enter the runtime, naming input and row; pane and window storage depends on the panes
present, never on ``max_ts - min_ts``; and no window can end past int64 max.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.runtime.packets import (
    EVENT_TIME_MAX,
    EVENT_TIME_MIN,
    TS_MAX,
    event_times,
)
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.window.spec import (
    MAX_DURATION_MS,
    MAX_WINDOWS_PER_ROW,
    WindowSpec,
    parse_duration,
)
from spark_stream_sched.testing.reference import reference_aggregate

from .test_properties import assert_rows_equal

MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z in milliseconds
INT64_MIN = int(np.iinfo(np.int64).min)
AGGS = ["count(*) as n", "sum(v) as total", "first(v) as first_v", "last(v) as last_v"]


def _table(ts: list[int], start: int = 0) -> pa.Table:
    n = len(ts)
    return pa.table({"ts": pa.array(ts, pa.int64()),
                     "k": pa.array([(start + i) % 3 for i in range(n)], pa.int64()),
                     "v": pa.array([float(start + i) for i in range(n)], pa.float64())})


def _query(policy: str = "fail") -> OrderedAggregation:
    return OrderedAggregation(2, WindowSpec(10_000, 1_000), ["k"], AGGS, "ts", policy,
                              _table([]).schema)


# -- entry checks ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["fail", "drop"])
def test_a_microsecond_ts_among_ms_rows_names_input_row_and_unit(policy: str) -> None:
    """Out-of-range rows always fail (a unit mistake is a broken input, not a late tuple)."""
    query = _query(policy)
    query.push(0, _table([MS, MS + 5]))
    query.push(1, _table([MS, MS + 1]))  # positions 0 and 1 of input 1
    with pytest.raises(InputError, match=r"^input 1: event time 1700000000002000 ms .* at row "
                                         r"3 .*looks like microseconds; convert the column"):
        query.push(1, _table([MS + 2, (MS + 2) * 1000]))  # position 3 is in microseconds


def test_a_ts_at_int64_max_is_named_as_a_sentinel() -> None:
    query = _query()
    with pytest.raises(InputError, match=r"input 0: event time 9223372036854775807 ms in column "
                                         r"'ts' at row 1 is outside the supported range.*sentinel"):
        query.push(0, _table([MS, TS_MAX]))


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, EVENT_TIME_MAX + 1])
def test_a_uint64_ts_past_the_range_is_refused_before_it_can_wrap(value: int) -> None:
    """2**64 - 1 cast to int64 is -1, a valid time: it used to pass as 1969-12-31."""
    table = pa.table({"ts": pa.array([value, 5], pa.uint64())})
    with pytest.raises(InputError, match=rf"^input 0 file 'f': event time {value} ms in column "
                                         rf"'ts' at row 7 is outside the supported range"):
        event_times(table, "ts", "input 0 file 'f'", first_row=7)
    small = pa.table({"ts": pa.array([MS, MS + 1], pa.uint64())})
    assert event_times(small, "ts", "x").tolist() == [MS, MS + 1]


def test_nanoseconds_and_years_before_0001_are_refused() -> None:
    with pytest.raises(InputError, match="looks like nanoseconds"):
        event_times(_table([MS * 1_000_000]), "ts", "input 2")
    with pytest.raises(InputError, match=r"input 2: event time -62135596800001 ms .* at row 7"):
        event_times(_table([EVENT_TIME_MIN - 1]), "ts", "input 2", first_row=7)


UNITS = {"s": 1000, "ms": 1, "us": 1000, "ns": 1_000_000}


@settings(max_examples=200, deadline=None)
@example([EVENT_TIME_MIN * 1000, EVENT_TIME_MAX * 1000 + 999], "us")  # both ends: accepted
@example([EVENT_TIME_MAX // 1000 + 1], "s")  # would overflow nothing, but is year 10000
@example([TS_MAX], "s")  # seconds * 1000 would overflow int64
@given(st.lists(st.integers(INT64_MIN, TS_MAX) | st.integers(-10**15, 10**15), min_size=1,
                max_size=8),
       st.sampled_from([None, *UNITS]))
def test_event_times_are_in_range_or_a_clear_error(values: list[int], unit: str | None) -> None:
    """Integer and timestamp columns of every unit: in range and exact, or an InputError."""
    kind = pa.int64() if unit is None else pa.timestamp(unit)
    table = pa.table({"ts": pa.array(values, pa.int64()).cast(kind)})
    if unit == "s":
        expected = [v * 1000 for v in values]
    elif unit in ("us", "ns"):
        expected = [v // UNITS[unit] for v in values]
    else:
        expected = list(values)
    bad = [i for i, t in enumerate(expected) if not EVENT_TIME_MIN <= t <= EVENT_TIME_MAX]
    if bad:
        with pytest.raises(InputError, match=f"at row {bad[0] + 5} is outside the supported"):
            event_times(table, "ts", "input 0", first_row=5)
    else:
        assert event_times(table, "ts", "input 0").tolist() == expected


# -- no window can end past int64 max ---------------------------------------------------------


def test_windows_are_capped_at_the_supported_span_and_such_windows_are_emitted() -> None:
    with pytest.raises(ConfigError, match="window size '9223372036854775807 days' is "
                                          r"796899343984252629724800000 ms, longer than"):
        parse_duration("9223372036854775807 days", "window size")
    with pytest.raises(ConfigError, match="longer than the supported event-time span"):
        WindowSpec(MAX_DURATION_MS + 1, 1000)
    # The longest window accepted, over tuples at both ends of the range: all emitted.
    spec = WindowSpec(MAX_DURATION_MS, MAX_DURATION_MS)
    a = _table([EVENT_TIME_MIN, -1, 0, EVENT_TIME_MAX])
    b = _table([EVENT_TIME_MIN + 1, EVENT_TIME_MAX], start=4)
    query = OrderedAggregation(2, spec, ["k"], AGGS, "ts", "fail", a.schema)
    for i, table in enumerate([a, b]):
        query.push(i, table)
        query.finish(i)
    expected = reference_aggregate([a, b], spec, ["k"], AGGS)
    assert_rows_equal(query.poll().to_pylist(), expected)
    assert max(r["window_end"] for r in expected) > EVENT_TIME_MAX


@settings(max_examples=300, deadline=None)
@given(st.integers(1, MAX_DURATION_MS), st.integers(1, MAX_DURATION_MS),
       st.integers(EVENT_TIME_MIN, EVENT_TIME_MAX))
def test_every_window_of_a_supported_ts_ends_inside_int64_and_closes_at_finish(
        size: int, slide: int, ts: int) -> None:
    """With ts in range and W, S <= the span, window ends stay far below int64 max, so the
    final ready bound TS_MAX closes (emits) every window: none is silently lost. A longer
    window, which could break this, is refused."""
    size, slide = max(size, slide), min(size, slide)
    slide = max(slide, -(-size // MAX_WINDOWS_PER_ROW))  # longer: refused (tested elsewhere)
    with pytest.raises(ConfigError, match="longer than the supported event-time span"):
        WindowSpec(size + MAX_DURATION_MS, slide)
    spec = WindowSpec(size, slide)
    windows = spec.windows_of(ts)
    last_end = windows[-1] * slide + size
    assert windows[0] * slide >= EVENT_TIME_MIN - MAX_DURATION_MS
    assert last_end <= EVENT_TIME_MAX + MAX_DURATION_MS < TS_MAX
    assert spec.last_closed_window(TS_MAX) >= windows[-1]


# -- pane storage independent of the event-time span ------------------------------------------

# Runs in a child process whose address space is capped at 1 GiB: the old code asked NumPy for
# ``(max_ts - min_ts) / pane`` cells (7.45 GiB for 10^12 ms with 1 s panes) and dies there.
_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
import pyarrow as pa
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.window.spec import WindowSpec
spec = json.loads(sys.argv[1])
tables = [pa.table(t) for t in spec["inputs"]]
query = OrderedAggregation(len(tables), WindowSpec(10_000, 1_000), ["k"], spec["aggs"], "ts",
                           "fail", tables[0].schema)
query.window.mode = spec["mode"]
out, offsets = [], [0] * len(tables)
while any(o < t.num_rows for o, t in zip(offsets, tables)):
    for i, t in enumerate(tables):
        if offsets[i] < t.num_rows:
            query.push(i, t.slice(offsets[i], 7))
            offsets[i] += 7
            if offsets[i] >= t.num_rows:
                query.finish(i)
    out.extend(query.poll().to_pylist())
print(json.dumps(out))
"""

FAR_CASES = {
    # two rows 10^12 ms apart next to a dense block
    "far": [[MS + 13 * i for i in range(60)], [MS + 5, MS + 10**12]],
    # rows at the top of the supported range: their windows end past EVENT_TIME_MAX
    "top": [[MS + 7 * i for i in range(30)], [MS, *range(EVENT_TIME_MAX - 25_000,
                                                         EVENT_TIME_MAX + 1, 2500)]],
    # rows at the bottom (before the epoch: floor division) and at the top
    "both_ends": [[EVENT_TIME_MIN, EVENT_TIME_MIN + 999, 0, EVENT_TIME_MAX],
                  [EVENT_TIME_MIN + 1500, MS, EVENT_TIME_MAX]],
}


@pytest.mark.parametrize("mode", ["auto", "dense", "sparse"])
@pytest.mark.parametrize("case", sorted(FAR_CASES))
def test_far_apart_rows_finish_in_bounded_memory_and_equal_the_oracle(case: str,
                                                                      mode: str) -> None:
    tables = [_table(ts, start=10 * i) for i, ts in enumerate(FAR_CASES[case])]
    arg = json.dumps({"inputs": [t.to_pydict() for t in tables], "aggs": AGGS, "mode": mode})
    proc = subprocess.run([sys.executable, "-c", _CHILD, arg], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    expected = reference_aggregate(tables, WindowSpec(10_000, 1_000), ["k"], AGGS)
    assert_rows_equal(got, expected)
    assert max(r["window_end"] for r in got) == max(r["window_end"] for r in expected)
