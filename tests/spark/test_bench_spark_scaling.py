"""``bench spark``'s cores case: each master in a process of its own, outputs checked here."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from spark_stream_sched.bench.common import progress
from spark_stream_sched.bench.spark_cases import Case, prepare
from spark_stream_sched.bench.spark_model import model_rows
from spark_stream_sched.bench.spark_scaling import SCALING_ENGINES, run_scaling
from spark_stream_sched.errors import SparkStreamSchedError

pytestmark = pytest.mark.spark


@pytest.mark.slow
@pytest.mark.bench
def test_every_scaling_engine_runs_on_one_and_two_cores_and_feeds_the_model(
        tmp_path: Path) -> None:
    case = Case("main", tmp_path / "main", SCALING_ENGINES, 1, (8, 4))
    work, truth, _ = prepare(case, 3_000, 2, 20, 0, "30 seconds", "3 seconds", "10 seconds")
    with progress(4, "test", enabled=False) as bar:
        rows = run_scaling(tmp_path / "cores", work, truth, SCALING_ENGINES, (1, 2), 1, 16, bar)
    assert [(r["engine"], r["master"]) for r in rows] == [
        (engine, master) for master in ("local[1]", "local[2]") for engine in SCALING_ENGINES]
    one = {r["engine"]: r for r in rows if r["cores"] == 1}
    for r in rows:  # floor-python emits nothing; native leaves the last windows open
        expected = {"floor-python": None, "native": False, "native-minby": False}
        assert r["matches_truth"] is expected.get(r["engine"], True), r
        assert r["micro_batches"] >= 1
        assert r["cores_speedup"] == round(one[r["engine"]]["seconds_median"]
                                           / r["seconds_median"], 2)
        assert r["cpu_jvm_tasks_s"] > 0, r  # the executor's task threads were sampled
        assert 0 < r["cores_busy"] <= (os.cpu_count() or 1) + 0.1  # CPU s per wall s
        # Spark's own task metrics: the tasks took time, at most the run's on every core
        assert 0 < r["task_s"] < r["cores"] * r["seconds"][0], r
        if r["cores"] == 1:  # "seconds" holds the run's wall time rounded to 0.01 s
            assert r["outside_tasks_s"] == pytest.approx(r["seconds"][0] - r["task_s"],
                                                         abs=0.006)
        else:
            assert r["outside_tasks_s"] is None
        assert r["tasks"] >= r["micro_batches"]
    for engine in ("transform", "ordered-agg-sink", "floor-python"):
        assert one[engine]["cpu_tasks_s"] > 0, engine  # their Python ran in the tasks
    for engine in ("native", "native-minby", "transform", "ordered-agg-sink"):
        assert one[engine]["shuffle_bytes_per_row"] > 0, engine  # they shuffle by key/group
    assert one["ordered-agg"]["shuffle_bytes_per_row"] == 0  # the source shuffles nothing
    sinks = [r for r in rows if r["engine"] == "ordered-agg-sink"]
    assert all(r["groups_on_driver"] == 0 and r["sink_tasks_cpu_s"] > 0 for r in sinks)
    model = model_rows(rows, (4,))
    inputs = {r["engine"]: r for r in model if r["case"] == "model"}
    assert set(inputs) == set(SCALING_ENGINES)
    for engine, r in inputs.items():
        assert r["one_core_s"] == one[engine]["seconds_median"]
        assert r["serial_s"] + r["task_s"] == pytest.approx(r["one_core_s"], abs=0.002)
        assert r["model_rows_per_s_4"] > 0
    checks = [r for r in model if r["case"] == "check"]
    assert sorted(r["engine"] for r in checks) == sorted(SCALING_ENGINES)
    assert all(r["master"] == "local[2]" and r["measured_over_model"] > 0 for r in checks)


def test_a_failing_child_is_an_error_naming_its_log(tmp_path: Path) -> None:
    case = Case("main", tmp_path / "main", ("ordered-agg-sink",), 1, (8, 4))
    work, truth, _ = prepare(case, 1_000, 2, 5, 0, "30 seconds", "3 seconds", "10 seconds")
    broken = dataclasses.replace(work, dirs=(str(tmp_path / "missing"),) * 2)
    with progress(1, "test", enabled=False) as bar, \
            pytest.raises(SparkStreamSchedError, match=r"local\[1\] run failed.*child-stderr"
                                                       r".*no input file part-\*\.parquet in"):
        run_scaling(tmp_path / "cores", broken, truth, ("ordered-agg-sink",), (1,), 1, 8, bar)
