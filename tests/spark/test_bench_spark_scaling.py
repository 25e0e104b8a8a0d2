"""``bench spark``'s cores case: each master in a process of its own, outputs checked here."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from spark_stream_sched.bench.common import progress
from spark_stream_sched.bench.spark_cases import Case, prepare
from spark_stream_sched.bench.spark_scaling import SCALING_ENGINES, run_scaling
from spark_stream_sched.errors import SparkStreamSchedError

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_the_transformation_and_the_sink_run_on_one_and_two_cores(tmp_path: Path) -> None:
    case = Case("main", tmp_path / "main", SCALING_ENGINES, 1, (8, 4))
    work, truth, _ = prepare(case, 3_000, 2, 20, 0, "30 seconds", "3 seconds", "10 seconds")
    with progress(4, "test", enabled=False) as bar:
        rows = run_scaling(tmp_path / "cores", work, truth, SCALING_ENGINES, (1, 2), 1, 16, bar)
    assert [(r["engine"], r["master"]) for r in rows] == [
        (engine, master) for master in ("local[1]", "local[2]") for engine in SCALING_ENGINES]
    one = {r["engine"]: r for r in rows if r["cores"] == 1}
    for r in rows:  # floor-python emits nothing: no output to compare
        assert r["matches_truth"] is (None if r["engine"] == "floor-python" else True), r
        assert r["micro_batches"] >= 1
        assert r["cores_speedup"] == round(one[r["engine"]]["seconds_median"]
                                           / r["seconds_median"], 2)
        assert r["cpu_tasks_s"] > 0  # floor-python too: its Python function ran in the tasks
        assert 0 < r["cores_busy"] <= (os.cpu_count() or 1) + 0.1  # CPU s per wall s
    sinks = [r for r in rows if r["engine"] == "ordered-agg-sink"]
    assert all(r["groups_on_driver"] == 0 and r["sink_tasks_cpu_s"] > 0 for r in sinks)


def test_a_failing_child_is_an_error_naming_its_log(tmp_path: Path) -> None:
    case = Case("main", tmp_path / "main", ("ordered-agg-sink",), 1, (8, 4))
    work, truth, _ = prepare(case, 1_000, 2, 5, 0, "30 seconds", "3 seconds", "10 seconds")
    broken = dataclasses.replace(work, dirs=(str(tmp_path / "missing"),) * 2)
    with progress(1, "test", enabled=False) as bar, \
            pytest.raises(SparkStreamSchedError, match=r"local\[1\] run failed.*child-stderr"):
        run_scaling(tmp_path / "cores", broken, truth, ("ordered-agg-sink",), (1,), 1, 8, bar)
