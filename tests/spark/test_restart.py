"""Exactly once across a driver crash: SIGKILL mid-run, restart from the checkpoint.

The driver runs in a subprocess (``restart_driver.py``) with a small ``maxRecordsPerTrigger`` so
the query takes many micro-batches; it is killed with SIGKILL right after its second batch was
written (the third is then being planned or read), restarted on the same checkpoint and state,
and must produce exactly the batches and rows of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .helpers import (
    assert_matches_oracle,
    expected_rows,
    flatten,
    kill_after_batches,
    run_available_now,
    source_options,
    write_inputs,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _driver(options_file: str, checkpoint: str, out: str) -> subprocess.Popen[str]:
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": REPO}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.restart_driver", options_file, checkpoint, out],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _read_batches(out: str) -> list[dict]:
    names = sorted(n for n in os.listdir(out) if n.endswith(".parquet"))
    tables = [pq.read_table(os.path.join(out, n)) for n in names]
    return pa.concat_tables(tables).to_pylist() if tables else []


def test_sigkill_mid_run_then_restart_gives_identical_output(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=150)
    options = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                             maxRecordsPerTrigger=100)
    options_file = str(tmp_path / "options.json")
    with open(options_file, "w", encoding="utf-8") as fh:
        json.dump(options, fh)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ckpt")

    seen = kill_after_batches(_driver(options_file, checkpoint, out), 2)
    assert seen == ["BATCH 0", "BATCH 1"]

    second = _driver(options_file, checkpoint, out)
    stdout, _ = second.communicate(timeout=300)
    assert second.returncode == 0
    assert "DONE" in stdout
    restarted = _read_batches(out)

    clean_options = options | {"stateLocation": str(tmp_path / "state-clean")}
    clean = flatten(run_available_now(spark, clean_options, str(tmp_path / "ckpt-clean")))
    assert restarted == clean  # same rows, same values, same order of windows
    assert_matches_oracle(restarted, expected_rows(tables))
