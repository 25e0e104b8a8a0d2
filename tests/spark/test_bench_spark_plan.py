"""``bench spark``'s run plan and report, without Spark."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from spark_stream_sched.bench import spark_cases, spark_cli, spark_native
from spark_stream_sched.bench.spark_cases import Case, cpu_by_role, sink_counters, with_ratios
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
    parser = argparse.ArgumentParser()
    spark_cli.add_args(parser)
    assert parser.parse_args([]).engines == ",".join(spark_cases.ENGINES)  # default: all
    # the long case gives the source its own sizing (0 files per batch): no file-stream engine
    assert set(spark_native.LONG_ENGINES) == {"ordered-agg", "floor-precomputed", "floor-empty"}


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
    cores = [{"case": "cores", "engine": "transform", "master": f"local[{n}]", "cores": n,
              "runs": 3, "warmup": 1, "seconds_median": s, "load_1m": [4.0]}
             for n, s in [(1, 40.0), (2, 25.0)]]
    text = format_results(rows + cores)
    assert "3 timed runs after 1 warm-up round(s)" in text
    assert "1.0-2.5" in text
    assert "local[2]" in text


@pytest.mark.parametrize(("flags", "message"), [
    (["--batchings", "4"], "--batchings '4'"),
    (["--engines", "native,spark"], "choose from native, ordered-agg, transform"),
    (["--cores", "1,x"], "--cores '1,x'"),
    (["--warmup", "-1"], "--warmup -1: must be >= 0"),
    (["--long-rows", "-5"], "--long-rows -5: must be >= 0"),
])
def test_bad_flags_fail_before_spark_starts(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        spark_cli.main(flags)
