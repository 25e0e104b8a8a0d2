"""spark-submit of the ordered-agg job on a real cluster (master + 2 workers).

Each test runs twice: on a standalone cluster started from the installed pyspark, and on the
docker-compose cluster of ``docker-compose.yml`` (marker ``compose``). Both tests compare the
job's Parquet output with the reference oracle run on the same generated inputs. The second
kills one worker (its JVM and its executors, SIGKILL) after the first micro-batch has
committed: Spark must finish the query on the surviving worker with the same result, because
``read()`` is stateless and every batch's state is versioned on disk.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spark_stream_sched.inputs import read_input
from spark_stream_sched.jobs.results import read_output
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

pytestmark = pytest.mark.cluster
AGGREGATES = ["count(*) as readings", "avg(value) as avg_kwh", "first(value) as first_kwh",
              "count_where(kind = 'alarm') as alarms"]


def write_config(root: Path, rows: int, per_trigger: int) -> Path:
    quoted = ", ".join(f'"{a}"' for a in AGGREGATES)
    config = root / "job.toml"
    config.write_text(f"""
[job]
name = "cluster"
engine = "source"
output = "{root / 'output'}"
checkpoint = "{root / 'checkpoint'}"
max_records_per_trigger = {per_trigger}
show = 3

[data]
generate = true
dir = "{root / 'input'}"
inputs = 4
meters = 50
rows = {rows}
files_per_input = 4
seed = 7

[query]
key_columns = ["meter"]
window = "30s"
slide = "3s"
aggregates = [{quoted}]
""")
    return config


def expected(root: Path) -> list[dict]:
    inputs = [read_input(d, "parquet") for d in sorted((root / "input").iterdir()) if d.is_dir()]
    return reference_aggregate(inputs, WindowSpec.parse("30s", "3s"), ["meter"], AGGREGATES)


def assert_equal_rows(actual: list[dict], wanted: list[dict]) -> None:
    assert len(actual) == len(wanted)
    for got, want in zip(actual, wanted, strict=True):
        assert got.keys() == want.keys()
        for name, value in want.items():
            if isinstance(value, float):
                assert got[name] == pytest.approx(value, rel=1e-9), (name, got, want)
            else:
                assert got[name] == value, (name, got, want)


def as_millis(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        fixed = dict(row)
        for name in ("window_start", "window_end"):
            if hasattr(fixed[name], "timestamp"):
                fixed[name] = round(fixed[name].timestamp() * 1000)
        out.append(fixed)
    return out


def test_spark_submit_on_a_cluster_matches_oracle(cluster, tmp_path) -> None:
    root = cluster.job_dir(tmp_path.name)
    proc = cluster.submit(write_config(root, rows=6000, per_trigger=2000))
    log, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log[-3000:]
    result = read_output(root / "output", ["meter"]).to_pylist()
    assert_equal_rows(as_millis(result), expected(root))


def test_losing_a_worker_mid_query_still_gives_the_oracle_result(cluster, tmp_path) -> None:
    root = cluster.job_dir(tmp_path.name)
    proc = cluster.submit(write_config(root, rows=8000, per_trigger=1000))
    commits = root / "checkpoint" / "commits"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir()):
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the query ended before a worker could be killed"
    assert cluster.cores_used(0) == 1, "worker 0 runs no executor; killing it would prove nothing"
    cluster.kill_worker(0)
    try:
        log, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, log[-3000:]
        result = read_output(root / "output", ["meter"]).to_pylist()
        assert_equal_rows(as_millis(result), expected(root))
    finally:
        cluster.restart_worker(0)
