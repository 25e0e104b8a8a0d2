"""``bench spark``'s run plan and report, without Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_stream_sched.bench import spark_cases, spark_cli, spark_native
from spark_stream_sched.bench.spark_cases import (
    Case,
    cpu_by_role,
    sink_counters,
    stage_summary,
    with_ratios,
)
from spark_stream_sched.bench.spark_data import (
    DUPLICATES,
    SOURCE_SPLIT_ROWS,
    Workload,
    emitted_match,
    matches,
    source_options,
    truth_scores,
)
from spark_stream_sched.bench.spark_model import model_rows, projected_seconds
from spark_stream_sched.bench.spark_report import format_results
from spark_stream_sched.errors import ConfigError


def test_warm_up_rounds_come_first_with_batching_a_and_the_floors_skip_b() -> None:
    case = Case("main", Path("/x"), ("native", "transform", "floor-empty"), 2, (4, 1), 1)
    assert case.plan() == [
        ("native", 0, "W"), ("transform", 0, "W"), ("floor-empty", 0, "W"),
        ("native", 0, "A"), ("transform", 0, "A"), ("floor-empty", 0, "A"),
        ("native", 1, "A"), ("transform", 1, "A"), ("floor-empty", 1, "A"),
        ("native", 2, "B"), ("transform", 2, "B")]
    assert [case.files(b) for b in "WAB"] == [4, 4, 1]
    long = Case("long", Path("/x"), ("ordered-agg",), 1, None)
    assert long.plan() == [("ordered-agg", 0, "A")]
    assert long.files("A") == 0
    # the long case gives the source its own sizing (0 files per batch): no file-stream engine
    assert set(spark_native.LONG_ENGINES) == {"ordered-agg", "ordered-agg-driver",
                                              "floor-precomputed", "floor-empty"}


def test_cpu_means_and_driver_shares() -> None:
    records = [{"cpu": {"tasks": 3.0, "commit": 1.0, "driver": 0.0, "jvm": 4.0},
                "finish_cpu_s": 0.1,
                "markers": [{"driver_cpu_s": 0.5, "tasks_cpu_s": 1.5, "groups_on_driver": 2,
                             "rows_on_driver": 10, "groups_caught_up": 3},
                            {"batch_id": "final"}]},
               {"cpu": {"tasks": 1.0, "commit": 1.0, "driver": 0.0, "jvm": 2.0},
                "finish_cpu_s": 0.3,
                "markers": [{"driver_cpu_s": 0.5, "tasks_cpu_s": 0.5, "groups_on_driver": 0,
                             "rows_on_driver": 0, "groups_caught_up": 1}]}]
    cpu = cpu_by_role(records)
    assert cpu["cpu_tasks_s"] == 2.0
    assert cpu["cpu_total_s"] == 6.0
    assert cpu["proc_driver_share_pct"] == 33.3
    sink = sink_counters(records)
    assert sink["sink_driver_cpu_s"] == 0.5
    assert sink["sink_tasks_cpu_s"] == 1.0
    assert sink["sink_driver_share_pct"] == 33.3
    assert (sink["groups_on_driver"], sink["rows_on_driver"], sink["groups_caught_up"]) == (
        1, 5, 2)
    assert sink["finish_cpu_s"] == 0.2
    assert sink_counters([{"cpu": {}}]) == {}
    native = cpu_by_role([{"cpu": {"tasks": 0.0, "commit": 0.0, "driver": 0.01, "jvm": 9.0}}])
    assert native["proc_driver_share_pct"] is None  # no Python to share


def test_ratios_and_the_tables() -> None:
    rows = with_ratios([
        {"case": "main", "engine": e, "seconds_median": s, "rows": 10, "inputs": 2, "keys": 3,
         "window": "30 s", "slide": "3 s", "watermark": "10 s" if e == "native" else None,
         "batching_a": 4, "batching_b": 1, "runs": 3, "warmup": 1, "oracle": "reference",
         "load_1m": [1.0, 2.5]}
        for e, s in [("native", 30.0), ("ordered-agg", 10.0), ("floor-precomputed", 5.0),
                     ("floor-empty", 2.0), ("floor-python", 4.0)]])
    by = {r["engine"]: r for r in rows}
    assert by["ordered-agg"]["speedup_vs_native"] == 3.0
    assert by["ordered-agg"]["x_floor"] == 2.0
    assert by["ordered-agg"]["x_empty_floor"] == 5.0
    assert by["ordered-agg"]["x_python_floor"] == 2.5
    assert by["native"]["x_python_floor"] == 7.5
    assert "driver_marginal_per_m_rows_s" not in by["ordered-agg"]  # no CPU figures here
    assert "cpu_per_m_rows_s" not in by["ordered-agg"]
    cores = [{"case": "cores", "engine": "transform", "master": f"local[{n}]", "cores": n,
              "runs": 3, "warmup": 1, "seconds_median": s, "load_1m": [4.0]}
             for n, s in [(1, 40.0), (2, 25.0)]]
    text = format_results(rows + cores)
    assert "3 timed runs after 1 warm-up round(s)" in text
    assert "1.0-2.5" in text
    assert "local[2]" in text


def test_cpu_per_million_rows_and_its_ratios_to_native_and_the_floors() -> None:
    rows = with_ratios([
        {"case": "main", "engine": e, "seconds_median": 1.0, "rows": 2_000_000,
         "cpu_total_s": cpu, "inputs": 2, "keys": 3, "window": "30 s", "slide": "3 s",
         "batching_a": 4, "batching_b": 1, "runs": 3, "warmup": 1, "oracle": "reference"}
        for e, cpu in [("native", 13.0), ("native-minby", 39.0), ("transform", 26.0),
                       ("floor-apply-in-pandas-with-state", 13.0), ("floor-python", 8.0),
                       ("ordered-agg", 6.5)]])
    by = {r["engine"]: r for r in rows}
    assert by["transform"]["cpu_per_m_rows_s"] == 13.0
    assert (by["transform"]["cpu_x_native"], by["transform"]["cpu_x_minby"]) == (2.0, 0.67)
    assert by["transform"]["cpu_x_op_floor"] == 2.0
    assert by["transform"]["cpu_x_python_floor"] == 3.25
    assert by["ordered-agg"]["cpu_x_native"] == 0.5
    assert by["ordered-agg"]["cpu_x_op_floor"] is None  # the source has no such floor
    text = format_results(rows)
    header = text.splitlines()[2]
    assert "cpu s/M rows" in header
    assert "wall median s" in header


def test_the_drivers_marginal_cpu_is_the_sources_less_the_floors_per_million_rows() -> None:
    rows = with_ratios([
        {"engine": e, "seconds_median": 1.0, "rows": 2_000_000, "cpu_driver_s": cpu}
        for e, cpu in [("ordered-agg", 2.5), ("ordered-agg-driver", 1.9),
                       ("floor-precomputed", 1.8), ("transform", 0.3)]])
    by = {r["engine"]: r for r in rows}
    assert by["ordered-agg"]["driver_marginal_per_m_rows_s"] == 0.35
    assert by["ordered-agg-driver"]["driver_marginal_per_m_rows_s"] == 0.05
    assert "driver_marginal_per_m_rows_s" not in by["transform"]  # not a source


def test_quick_is_one_session_of_the_source_and_the_sink_on_tiny_data(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """What ``--quick`` hands the run (without Spark): one session, no cores case (each of its
    masters starts a JVM), the truth still checked in two batchings; flags beside it win."""
    from spark_stream_sched.bench import spark_bench
    from spark_stream_sched.bench.common import QUICK_WARNING

    runs: list[dict[str, object]] = []
    monkeypatch.setattr(spark_bench, "run", lambda **kwargs: runs.append(kwargs) or [])
    assert spark_cli.main(["--quick", "--no-progress"]) == 0
    quick = runs.pop()
    assert {k: quick[k] for k in ("rows", "n_inputs", "keys", "runs", "batchings", "engines",
                                  "long_rows", "cores", "warmup")} == {
        "rows": 4_000, "n_inputs": 2, "keys": 20, "runs": 1, "batchings": (16, 8),
        "engines": ["ordered-agg", "ordered-agg-sink"], "long_rows": 0, "cores": [],
        "warmup": 0}
    assert capsys.readouterr().out.splitlines() == [QUICK_WARNING, "(no results)",
                                                    QUICK_WARNING]
    assert spark_cli.main(["--quick", "--engines", "native,transform", "--cores", "1,2",
                           "--batchings", "4,1", "--inputs", "3"]) == 0
    given = runs.pop()
    assert (given["engines"], given["cores"], given["batchings"], given["n_inputs"]) == (
        ["native", "transform"], [1, 2], (4, 1), 3)
    assert capsys.readouterr().out.count(QUICK_WARNING) == 2  # still a quick run
    assert spark_cli.main([]) == 0  # the full run's defaults
    full = runs.pop()
    assert (full["rows"], full["n_inputs"], full["keys"], full["runs"], full["batchings"],
            full["engines"], full["cores"], full["warmup"], full["long_rows"]) == (
        2_000_000, 8, 1000, 3, (4, 1), list(spark_cases.ENGINES), [1, 2], 1, 8_000_000)
    assert QUICK_WARNING not in capsys.readouterr().out


@pytest.mark.parametrize(("flags", "message"), [
    (["--batchings", "4"], "--batchings '4'"),
    (["--engines", "native,spark"], "choose from native, native-minby, ordered-agg, ordered-agg-"),
    (["--cores", "1,x"], "--cores '1,x'"),
    (["--warmup", "-1"], "--warmup -1: must be >= 0"),
    (["--long-rows", "-5"], "--long-rows -5: must be >= 0"),
    (["--project-cores", "4,0"], "--project-cores '4,0': core counts must be >= 1"),
    (["--cluster", "local[2]"], "--cluster 'local[2]': expected a standalone master URL"),
    (["--cluster", "spark://127.0.0.1:7077", "--cluster-cores", "0"],
     "--cluster-cores 0: must be >= 1"),
    (["--partitions", "0"], "--partitions 0: must be >= 1"),
])
def test_bad_flags_fail_before_spark_starts(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        spark_cli.main(flags)


def test_the_help_lists_the_new_engine_and_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        spark_cli.main(["--help"])
    text = capsys.readouterr().out
    for word in ("native-minby", "--project-cores", "--cluster", "--cluster-cores",
                 "--partitions", "ordered-agg-driver"):
        assert word in text, word


def test_emitted_windows_are_judged_apart_from_the_windows_left_open() -> None:
    truth = {(0, 1): (2, 5.0), (0, 2): (1, 7.0), (3000, 1): (1, 6.0)}
    right_but_open = {(0, 1): (2, 5.5, 5.0), (0, 2): (1, 7.0, 7.0)}
    assert emitted_match(right_but_open, truth)
    assert not matches(right_but_open, truth)
    scores = truth_scores(right_but_open, truth)
    assert (scores["windows_emitted"], scores["windows_open"], scores["first_matches_pct"]) == (
        2, 1, 100.0)
    wrong_first = {**right_but_open, (0, 2): (1, 7.0, 8.0)}
    assert not emitted_match(wrong_first, truth)
    assert truth_scores(wrong_first, truth)["first_matches_pct"] == 50.0
    assert not emitted_match({**right_but_open, (6000, 1): (1, 1.0, 1.0)}, truth)  # not true
    assert not emitted_match({**right_but_open, DUPLICATES: (1, 0.0, 0.0)}, truth)
    assert matches({**right_but_open, (3000, 1): (1, 6.0, 6.0)}, truth)


def test_stage_metrics_give_the_time_outside_tasks_and_shuffle_bytes_per_row() -> None:
    records = [{"seconds": s, "stages": {"task_s": t, "task_jvm_cpu_s": 1.0,
                                         "shuffle_write_bytes": b, "tasks": 8}}
               for s, t, b in [(10.0, 6.0, 400), (12.0, 7.0, 500), (11.0, 9.0, 600)]]
    assert stage_summary(records, rows=100)["outside_tasks_s"] is None  # cores unknown
    summary = stage_summary(records, rows=100, cores=1)
    assert summary["task_s"] == 7.0
    assert summary["outside_tasks_s"] == 4.0  # median of 4, 5, 2
    assert summary["shuffle_bytes_per_row"] == 5.0
    assert summary["tasks"] == 8
    assert stage_summary([*records, {"seconds": 1.0, "stages": {}}], 100) == {}


def one_core(engine: str, seconds: float, task: float) -> dict[str, object]:
    return {"case": "cores", "engine": engine, "cores": 1, "master": "local[1]", "rows": 2_000_000,
            "micro_batches": 4, "seconds_median": seconds, "rows_per_s_median": 1, "runs": 3,
            "warmup": 1,
            "task_s": task, "outside_tasks_s": seconds - task, "task_cpu_s": task * 1.1,
            "driver_cpu_s": 2.0, "shuffle_bytes_per_row": 30.0, "matches_truth": True}


def test_the_model_projects_the_one_core_run_and_checks_the_measured_points() -> None:
    measured = [one_core("transform", 20.0, 16.0), one_core("native", 30.0, 28.0),
                {**one_core("transform", 12.0, 0.0), "cores": 2, "master": "local[2]",
                 "rows_per_s_median": 2_000_000 // 12},
                {**one_core("transform", 11.0, 0.0), "case": "cluster", "cores": 2,
                 "master": "spark://127.0.0.1:7077", "rows_per_s_median": 2_000_000 // 11}]
    rows = model_rows(measured, (4, 64))
    model = {r["engine"]: r for r in rows if r["case"] == "model"}
    transform, native = model["transform"], model["native"]
    assert (transform["serial_s"], transform["task_s"], transform["cap"]) == (4.0, 16.0, 16)
    assert transform["serial_per_batch_s"] == 1.0
    assert transform["serial_per_m_rows_s"] == 2.0
    assert transform["driver_cpu_per_batch_s"] == 0.5
    assert transform["task_cpu_per_m_rows_s"] == 8.8
    assert transform["model_rows_per_s_4"] == round(2_000_000 / (4.0 + 16.0 / 4))
    # 64 cores: ours use at most one task per partition group (16)
    assert transform["model_rows_per_s_64"] == round(2_000_000 / (4.0 + 16.0 / 16))
    assert native["cap"] is None
    assert native["model_rows_per_s_64"] == round(2_000_000 / (2.0 + 28.0 / 64))
    assert projected_seconds(transform, 1) == 20.0  # the model reproduces its own input
    checks = [r for r in rows if r["case"] == "check"]
    assert [(r["engine"], r["master"]) for r in checks] == [
        ("transform", "local[2]"), ("transform", "spark://127.0.0.1:7077")]
    assert checks[0]["model_s"] == 12.0
    assert checks[0]["measured_over_model"] == 1.0
    assert checks[1]["measured_over_model"] == round((2_000_000 // 11) / (2_000_000 / 12), 2)
    text = format_results(measured + rows)
    assert "T(n) = S + P / min(n, cap)" in text
    assert "rows/s @64" in text
    assert "spark://127.0.0.1:7077" in text


def test_the_source_engines_differ_in_split_rows_and_partitions_reach_the_source() -> None:
    assert SOURCE_SPLIT_ROWS == {"ordered-agg": "auto", "ordered-agg-driver": "driver"}
    work = Workload(("/a", "/b"), (), 100, 10, "30 seconds", "3 seconds", "10 seconds")
    assert "numPartitions" not in source_options(work, None)  # the source's own default
    again = Workload.from_json({**work.to_json(), "partitions": 8})  # as a child run gets it
    assert source_options(again, 50)["numPartitions"] == "8"
    assert source_options(again, 50)["maxRecordsPerTrigger"] == "50"


STATEFUL = ("floor-apply-in-pandas-with-state", "floor-tws-row")


def test_the_other_stateful_floors_run_by_default_beside_floor_tws_but_not_in_quick() -> None:
    from spark_stream_sched.bench.spark_floor import INPUT_FLOORS, NO_OUTPUT, PACKED_FLOORS

    for engine in STATEFUL:
        assert engine in spark_cases.ENGINES
        assert engine in INPUT_FLOORS
        assert engine in NO_OUTPUT
        assert engine in PACKED_FLOORS
        assert engine not in spark_cli.QUICK_ENGINES
        assert spark_native.STATEFUL_FLOORS[engine] in ("applyInPandasWithState",
                                                        "transformWithState")
    assert spark_cases.ENGINES.index("floor-tws") < spark_cases.ENGINES.index(STATEFUL[0])


def test_a_floor_the_installed_pyspark_lacks_is_reported_with_its_reason(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pyspark.sql import GroupedData

    from spark_stream_sched.bench.spark_native import unavailable

    assert unavailable("floor-tws") is None
    if hasattr(GroupedData, "transformWithState"):
        assert unavailable("floor-tws-row") is None
        owner = next(c for c in GroupedData.__mro__ if "transformWithState" in vars(c))
        monkeypatch.delattr(owner, "transformWithState")  # a pyspark before 4.1
    reason = unavailable("floor-tws-row")
    assert reason is not None
    assert "transformWithState" in reason
    assert "\n" not in reason
    case = Case("main", tmp_path, ("floor-tws-row",), 1, (4, 1))
    work = Workload((), (), 10, 3, "30 seconds", "3 seconds", "10 seconds")
    ran: list[str] = []

    class Bar:
        def set_description(self, text: str) -> None: ...
        def update(self, n: int) -> None: ...

    results = spark_cases.run_case(case, work, {}, "reference",
                                   lambda engine, *rest: ran.append(engine) or {}, Bar())
    assert ran == []  # not run at all
    assert results == [{"bench": "spark", "case": "main", "engine": "floor-tws-row",
                        "rows": 10, "available": False, "unavailable": reason}]
    text = format_results(results)
    assert f"Not available here: floor-tws-row ({reason})" in text
