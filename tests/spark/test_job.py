"""Jobs from TOML configs: every engine gives the oracle's rows; the CLI ``run`` exits 0; a job
killed with SIGKILL after its first committed batch resumes from its checkpoint exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_stream_sched import cli
from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.jobs.config import load_job_config
from spark_stream_sched.jobs.results import read_output
from spark_stream_sched.jobs.runner import run_job
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

REPO = Path(__file__).resolve().parents[2]
AGGREGATES = ["count(*) as readings", "avg(value) as avg_kwh", "first(value) as first_kwh",
              "count_where(kind = 'alarm') as alarms"]


def write_config(tmp_path: Path, engine: str, rows: int = 1_500, files: int = 2,
                 inputs: int = 3) -> Path:
    aggregates = ", ".join(f'"{a}"' for a in AGGREGATES)
    text = f"""
[job]
name = "test_{engine}"
engine = "{engine}"
output = "{tmp_path / 'output'}"
checkpoint = "{tmp_path / 'checkpoint'}"
max_records_per_trigger = 600
max_files_per_trigger = 1
show = 3

[data]
generate = true
dir = "{tmp_path / 'input'}"
inputs = {inputs}
meters = 20
rows = {rows}
files_per_input = {files}
seed = 5

[query]
key_columns = ["meter"]
window = "20s"
slide = "5s"
aggregates = [{aggregates}]
"""
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def expected(rows: int = 1_500, inputs: int = 3) -> list[dict[str, Any]]:
    tables = smart_grid_streams(inputs, 20, rows=rows, seed=5)
    return reference_aggregate(tables, WindowSpec(20_000, 5_000), ["meter"], AGGREGATES)


def as_rows(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    for r in rows:
        r["avg_kwh"] = None if r["avg_kwh"] is None else round(r["avg_kwh"], 9)
    return rows


def rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "avg_kwh": None if r["avg_kwh"] is None else round(r["avg_kwh"], 9)}
            for r in rows]


def test_runtime_engine_equals_reference(tmp_path: Path) -> None:
    result = run_job(load_job_config(write_config(tmp_path, "runtime")))
    assert result.rows_in == 1_500
    assert as_rows(result.results) == rounded(expected())


def test_bad_config_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[job]\nengin = "source"\n')
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "did you mean 'engine'" in err


def test_bench_truth_equals_reference_oracle() -> None:
    from spark_stream_sched.bench.spark_native import reference_windows, true_windows

    tables = smart_grid_streams(4, 15, rows=3_000, seed=11, tick_ms=1_000)
    truth = true_windows(tables, 30_000, 3_000)
    assert truth == reference_windows(tables, 30_000, 3_000)
    assert len(truth) > 100


@pytest.mark.spark
def test_source_job_on_local_spark_equals_reference(spark: Any, tmp_path: Path) -> None:
    result = run_job(load_job_config(write_config(tmp_path, "source")), spark=spark)
    assert result.rows_in == 1_500
    assert result.batches >= 2
    assert as_rows(result.results) == rounded(expected())


@pytest.mark.spark
def test_cli_run_with_sink_engine_exits_0(spark: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, "sink")
    assert cli.main(["run", str(config), "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    assert "rows in       1,500" in out
    assert "batch 0 committed" in out
    results = read_output(tmp_path / "output", ["meter"])
    assert as_rows(results) == rounded(expected())


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.soak
def test_sigkill_after_first_batch_then_restart_is_exactly_once(tmp_path: Path) -> None:
    """The job (sink engine, own JVM) is killed right after its first committed micro-batch and
    rerun on the same checkpoint: the output equals the oracle, no duplicates, no loss."""
    rows, inputs = 4_000, 3
    config = write_config(tmp_path, "sink", rows=rows, files=6, inputs=inputs)
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [sys.executable, str(REPO / "spark_stream_sched" / "jobs" / "ordered_agg_job.py"),
               "--conf", str(config)]
    first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    assert first.stdout is not None
    for line in first.stdout:  # blocks until the listener reports the first committed batch
        if line.startswith("batch 0 committed"):
            break
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert first.returncode == -signal.SIGKILL
    commits = tmp_path / "checkpoint" / "ordered-agg-sink" / "commits"
    assert list(commits.glob("batch-*.json")), "the first batch was committed"
    assert not (commits / "final.json").exists(), "killed mid-run, not after the end"

    second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    assert second.returncode == 0, second.stderr[-2000:]
    results = read_output(tmp_path / "output", ["meter"])
    assert as_rows(results) == rounded(expected(rows, inputs))


def test_a_run_with_nothing_new_says_so_instead_of_a_rate() -> None:
    from spark_stream_sched.jobs.results import JobResult, format_summary

    rerun = JobResult("source", 8, 100_000, 43_000, 0, 2.5, "out", pa.table({}), 4.0)
    text = format_summary(rerun)
    assert "rows/s" not in text
    assert "nothing new to process" in text
    assert "batches       0 (the checkpoint had consumed every input already" in text
    fresh = JobResult("source", 8, 100_000, 43_000, 2, 2.5, "out", pa.table({}), 4.0)
    assert "40,000 rows/s" in format_summary(fresh)
