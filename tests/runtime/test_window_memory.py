"""Windows with many windows per row (W/S) combine in bounded memory, with the oracle's results.

A 1 day window sliding by 1 second puts every row in 86,400 windows; expanding every
``(pane, key)`` partial into all of its windows at once took 14.7 GB for 10,000 rows. The runs
of :mod:`~spark_stream_sched.runtime.window.runs` bound both ways of combining them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.window import runs
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from .test_properties import assert_rows_equal

AGGREGATES = ["count(*) as n", "sum(v) as s", "sum(i) as si", "first(v) as f", "last(i) as l",
              "min(v) as lo", "max(i) as hi", "first_where(v, v > 0.5) as fw"]

# The child caps its address space, so the old code fails there instead of taking the machine.
_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import numpy as np, pyarrow as pa
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec
mode, window, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(7)
table = pa.table({"ts": pa.array(np.sort(rng.integers(0, 3_600_000, n)), pa.int64()),
                  "k": pa.array(rng.integers(0, 10, n)), "v": pa.array(rng.random(n))})
op = WindowAggregator(WindowSpec.parse(window, "1 second"), ["k"],
                      ["count(*) as n", "sum(v) as s", "first(v) as f", "last(v) as l"], "ts",
                      table.schema, mode=mode)
op.update(table, None)
out = op.finish()
# VmHWM is this process image's own peak; ru_maxrss starts at the forking parent's peak
# (a pytest worker's, often over 500 MB) and survives exec.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"rows": out.num_rows, "n": int(np.asarray(out.column("n")).sum()),
                  "peak_mb": peak_kb // 1024}))
"""
#: Peak resident memory allowed for the child: importing NumPy and Arrow takes about 115 MB,
#: the day's 900,000 result rows and the combine about 330 MB in all, the hour by expansion
#: about 280 MB (before the runs: over 3 GB, 5.6 GiB asked at once, and 969 MB).
PEAK_MB = 512


@pytest.mark.parametrize(("mode", "window", "rows"), [
    ("auto", "1 day", 10_000), ("dense", "1 day", 10_000),
    ("sparse", "1 hour", 2_000),  # 7.2 million repeated partial rows
])
def test_a_day_sliding_by_a_second_over_10000_rows_stays_in_bounded_memory(
        mode: str, window: str, rows: int) -> None:
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode, window, str(rows)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["peak_mb"] < PEAK_MB, result
    per_row = WindowSpec.parse(window, "1 second").size_ms // 1000
    assert result["n"] == rows * per_row  # every row is in W/S windows


def rows_of(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 80))
    gaps = draw(st.lists(st.sampled_from([0, 1, 300, 1000, 2500, 60_000]), min_size=n,
                         max_size=n))
    return pa.table({
        "ts": pa.array(np.cumsum(gaps), pa.int64()),
        "k": pa.array(draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=n,
                                    max_size=n)), pa.string()),
        "v": pa.array(draw(st.lists(st.one_of(st.none(), st.floats(-10, 10)), min_size=n,
                                    max_size=n)), pa.float64()),
        "i": pa.array(draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), pa.int64()),
    })


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(60_000, 1000), (30_000, 1500), (10_000, 250)]),
       st.sampled_from(["auto", "dense", "sparse"]), st.sampled_from([1, 5, 64, 1 << 20]),
       st.sampled_from([40, 300, 1 << 22]), st.integers(1, 40))
def test_runs_of_any_bound_give_the_oracle_results(data, window, mode, expanded, cells,
                                                   step) -> None:
    """Tiny bounds cut the windows into many runs of both kinds: same rows, bit for bit."""
    table = rows_of(data.draw)
    spec = WindowSpec(*window)
    with mock.patch.object(runs, "MAX_EXPANDED", expanded), \
            mock.patch.object(runs, "MAX_CELLS", cells):
        op = WindowAggregator(spec, ["k"], AGGREGATES, "ts", table.schema, mode=mode)
        out = [op.update(table.slice(lo, step), int(table.column("ts")[lo].as_py()))
               for lo in range(0, table.num_rows, step)]
        result = pa.concat_tables([*out, op.finish()])
    assert_rows_equal(result.to_pylist(), reference_aggregate([table], spec, ["k"], AGGREGATES))


def test_more_windows_per_row_than_results_can_hold_are_refused_at_definition() -> None:
    """1 day sliding by 1 ms: 86.4 million result rows per row; the slide to use is named."""
    from spark_stream_sched.errors import ConfigError
    from spark_stream_sched.runtime.query import spec_from_options

    assert WindowSpec.parse("1 day", "9 milliseconds")  # 9.6 million windows per row: runs
    with pytest.raises(ConfigError) as refused:
        spec_from_options({"window": "1 day", "slide": "1 millisecond",
                           "aggregates": "count(*) as n"}, 1)
    assert str(refused.value).splitlines() == [
        "window 1 day sliding by 1 millisecond puts every row in 86,400,000 windows, each a "
        "result row; at most 10,000,000 windows per row are supported (one row's results would "
        "pass 0.5 GB per key); set slide to 9 milliseconds or more"]
