"""``bench spark`` runs every engine on the same tiny data and checks each against the truth."""

from __future__ import annotations

from typing import Any

import pytest

from spark_stream_sched.bench import spark_bench, spark_cases
from spark_stream_sched.bench.spark_report import format_results

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.bench]
OURS = ("ordered-agg", "ordered-agg-driver", "transform", "transform-keyed", "ordered-agg-sink",
        "ordered-agg-sink-unpartitioned", "floor-precomputed")


@pytest.fixture(scope="module")
def results(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return spark_bench.run(rows=4_000, n_inputs=2, keys=20, runs=1, batchings=(16, 8),
                            workdir=str(tmp_path_factory.mktemp("bench")), master="local[2]",
                            show_progress=False, long_rows=0, cores=(), warmup=0)


def test_every_engine_of_ours_equals_the_truth_in_every_batching(results) -> None:
    by = {r["engine"]: r for r in results}
    assert list(by) == list(spark_cases.ENGINES)
    for engine in OURS:
        assert by[engine]["matches_truth"] is True, engine
        assert by[engine]["windows_emitted"] == by[engine]["windows_true"] > 0, engine
    for engine in OURS[:-1]:  # the floor replays batching A only
        assert by[engine]["identical_across_batchings"] is True, engine
    assert by["floor-empty"]["windows_emitted"] == 0
    # the input floors read every row and emit nothing
    for floor in ("floor-input", "floor-python", "floor-tws", "floor-apply-in-pandas-with-state",
                  "floor-apply-in-pandas-with-state-keyed", "floor-tws-row"):
        assert by[floor]["rows_read"] == [4_000], floor
        assert by[floor]["matches_truth"] is None, floor
        assert by[floor]["windows_emitted"] == 0, floor
    # native's append mode never closes the last windows: it cannot equal the truth
    for engine in ("native", "native-minby"):
        assert by[engine]["windows_emitted"] < by[engine]["windows_true"], engine
        assert by[engine]["windows_open"] > 0, engine
        assert by[engine]["matches_truth"] is False, engine
    # min_by over Spark's file positions is right on every window it emits, in every run
    minby = by["native-minby"]
    assert minby["first_matches_pct"] == 100.0
    assert minby["emitted_match_truth"] is True
    assert minby["first_differs_across_batchings_pct"] == 0.0
    for engine in OURS:
        assert by[engine]["emitted_match_truth"] is True, engine
        assert by[engine]["windows_open"] == 0, engine


def test_ratios_are_against_native_and_the_floors_of_the_same_run(results) -> None:
    median = {r["engine"]: r["seconds_median"] for r in results}
    for r in results:
        assert r["speedup_vs_native"] == round(median["native"] / r["seconds_median"], 2)
        assert r["speedup_vs_minby"] == round(median["native-minby"] / r["seconds_median"], 2)
        assert r["x_floor"] == round(r["seconds_median"] / median["floor-precomputed"], 2)
        assert r["x_empty_floor"] == round(r["seconds_median"] / median["floor-empty"], 2)
        assert r["x_python_floor"] == round(r["seconds_median"] / median["floor-python"], 2)
    by = {r["engine"]: r for r in results}
    for engine, floor in [("transform", "floor-apply-in-pandas-with-state"),
                          ("transform-keyed", "floor-apply-in-pandas-with-state-keyed")]:
        assert by[engine]["x_op_floor"] == round(median[engine] / median[floor], 2)
    assert by["ordered-agg-sink"]["x_op_floor"] is None  # not a transformation


def test_the_partitioned_sink_merges_on_the_executors_and_reports_its_cpu(results) -> None:
    by = {r["engine"]: r for r in results}
    partitioned, spread = by["ordered-agg-sink"], by["ordered-agg-sink-unpartitioned"]
    assert partitioned["groups_on_driver"] == partitioned["rows_on_driver"] == 0
    assert partitioned["sink_tasks_cpu_s"] > 0
    assert 0 < partitioned["sink_driver_share_pct"] < 100
    # without partition_for_sink every group's rows reach several tasks: the driver merges them
    assert spread["rows_on_driver"] == 4_000
    assert spread["groups_on_driver"] > 0
    for engine in ("transform", "transform-keyed", "ordered-agg-sink",
                   "ordered-agg-sink-unpartitioned"):
        assert by[engine]["cpu_tasks_s"] > 0, engine  # their Python work runs in the tasks
        assert by[engine]["cpu_jvm_s"] > 0, engine
    assert "sink_driver_cpu_s" not in by["transform"]


def test_the_report_has_the_times_and_the_cpu_tables(results) -> None:
    text = format_results(results)
    assert "native/this" in text
    assert "minby/this" in text
    assert "windows open" in text
    assert "marker driver %" in text
    assert text.count("ordered-agg-sink-unpartitioned") == 2
    assert "x python floor" in text
    assert "x op floor" in text
