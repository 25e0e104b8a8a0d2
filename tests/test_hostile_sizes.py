"""Size attacks of the hostile-input suite: the memory they take, measured, against a bound.

A window of 1 day sliding by 1 second puts each row in 86,400 windows; over 10,000 rows of 10
meters in one hour that is 864 M (row, window) pairs. The runtime combines closed windows in
runs bounded in memory (docs/aggregates.md, "Many windows per row"), so the command line's
peak RSS stays under :data:`RSS_BOUND` (it reached 14.7 GB before the bound existed); the
counts must still be exact. The 60,000-aggregate option is refused at definition
(``test_hostile_definitions.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow

#: Peak RSS the 1 day / 1 s query may reach over its whole process tree.
RSS_BOUND = 1 << 30

MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"rc": done.returncode, "peak": peak, "stderr": done.stderr[-2000:]}))
"""


def test_a_one_day_window_sliding_by_one_second_runs_in_bounded_memory(tmp_path: Path) -> None:
    n = 10_000
    table = pa.table({"ts": pa.array([i * 360 for i in range(n)], pa.int64()),
                      "meter": pa.array([i % 10 for i in range(n)], pa.int64()),
                      "value": pa.array([1.0] * n)})
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet")
    out = tmp_path / "windows.parquet"
    cli = [sys.executable, "-m", "spark_stream_sched.cli", "aggregate", "--input",
           str(tmp_path / "in"), "--key", "meter", "--window", "1 day", "--slide", "1 second",
           "--agg", "count(*) as n", "--out", str(out)]
    measured = json.loads(subprocess.run([sys.executable, "-c", MEASURE, *cli],
                                         capture_output=True, text=True, check=True,
                                         timeout=1800).stdout)
    assert measured["rc"] == 0, measured["stderr"]
    print(f"\n1 day / 1 s over {n:,} rows: peak RSS {measured['peak'] / 2**20:.0f} MiB")
    assert measured["peak"] < RSS_BOUND, measured
    windows = pq.read_table(out, columns=["n"])
    assert pc.sum(windows.column("n")).as_py() == n * 86_400  # every row in 86,400 windows
