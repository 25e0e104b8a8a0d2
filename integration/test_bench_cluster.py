"""``bench spark``'s cluster point: the engines that scale, measured on master + 2 workers.

The source, ``ordered(...)`` and the sink run first on ``local[1]`` (the scaling model's inputs,
:mod:`spark_stream_sched.bench.spark_model`), then on the standalone cluster (2 workers x 1
core), each in a driver process of its own (:mod:`spark_stream_sched.bench.spark_scaling`), on
the same generated files. The test checks that every run's output equals the truth and that the
measured throughput and the model's projection for 2 cores are both computed and printed. It
does not judge their ratio: timings on a shared machine are not a test's business (the report
of the run says how close they came).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.bench.common import progress
from spark_stream_sched.bench.spark_cases import Case, prepare
from spark_stream_sched.bench.spark_model import model_rows
from spark_stream_sched.bench.spark_report import format_results
from spark_stream_sched.bench.spark_scaling import CLUSTER_ENGINES, run_cluster, run_scaling

pytestmark = pytest.mark.cluster
#: The largest workload that keeps this test to a few minutes on 2 cores.
ROWS, INPUTS, KEYS, FILES_PER_BATCH = 400_000, 8, 1000, 4
WARMUP, RUNS = 1, 1


def test_the_cluster_point_is_measured_and_set_beside_the_model(cluster: Any, tmp_path: Path,
                                                                capsys: Any) -> None:
    if not hasattr(cluster, "root"):  # only StandaloneCluster runs drivers on this host
        pytest.skip("compose: the bench's driver is a host process started from this venv, "
                    "and the compose cluster's executors run the image's Python")
    case = Case("main", tmp_path / "main", CLUSTER_ENGINES, RUNS, (FILES_PER_BATCH, 1))
    work, truth, _ = prepare(case, ROWS, INPUTS, KEYS, 0, "30 seconds", "3 seconds",
                             "10 seconds")
    with progress(1, "test", enabled=False) as bar:
        rows = run_scaling(tmp_path / "cores", work, truth, CLUSTER_ENGINES, (1,), RUNS,
                           FILES_PER_BATCH, bar, WARMUP)
        rows += run_cluster(tmp_path, work, truth, CLUSTER_ENGINES, cluster.url, 2, RUNS,
                            FILES_PER_BATCH, bar, WARMUP)
    results = rows + model_rows(rows)
    text = format_results(results)
    with capsys.disabled():
        print(f"\n{text}\n")

    measured = [r for r in rows if r["case"] == "cluster"]
    assert [r["engine"] for r in measured] == list(CLUSTER_ENGINES)
    for r in rows:  # every run of every engine, warm-up included, on both masters
        assert r["matches_truth"] is True, r
        assert (r["runs"], r["warmup"]) == (RUNS, WARMUP)
    for r in measured:
        assert (r["master"], r["cores"]) == (cluster.url, 2)
        assert r["task_s"] > 0  # Spark's task metrics came from the cluster's executors
    checks = {r["engine"]: r for r in results if r["case"] == "check"}
    assert set(checks) == set(CLUSTER_ENGINES)
    comparison = text.split("The model against measured runs")[1]
    for engine, check in checks.items():
        assert (check["master"], check["cores"]) == (cluster.url, 2)
        assert check["measured_rows_per_s"] > 0, check
        assert check["model_rows_per_s"] > 0, check
        assert check["measured_over_model"] == round(
            check["measured_rows_per_s"] / check["model_rows_per_s"], 2)
        # the comparison printed above holds both figures on the engine's line
        line = next(x for x in comparison.splitlines() if x.split()[:2] == [engine, cluster.url])
        assert f"{check['measured_rows_per_s']:,}" in line
        assert f"{check['model_rows_per_s']:,}" in line
