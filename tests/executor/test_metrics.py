"""Metrics: JSON lines are valid and their counts add up; progress dict; learned statistics."""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from spark_stream_sched.runtime.executor import Engine, WorkerPool
from spark_stream_sched.runtime.metrics import (
    JsonLinesWriter,
    PlanMetrics,
    read_json_lines,
    weighted_quantile,
)
from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan


def _plan() -> QueryPlan:
    return QueryPlan([
        OperatorDef("f", OperatorKind.FILTER, ("s",), params={"predicate": "x < 30"}),
        OperatorDef("m", OperatorKind.MAP, ("f",),
                    params={"column": "x", "function": "add", "args": ["x", 1]}),
        OperatorDef("w", OperatorKind.WINDOW_AGGREGATE, ("m",),
                    params={"size": 1000, "aggregates": ["count(*) as n"]}),
        OperatorDef("p", OperatorKind.PROJECT, ("s",), params={"columns": ["x"]}),
    ])


def _data(n: int = 4000) -> pa.Table:
    return pa.table({"ts": np.arange(n, dtype=np.int64) * 5,
                     "x": np.arange(n, dtype=np.int64) % 100})


@pytest.mark.parametrize("workers", [1, 3])
def test_json_lines_are_valid_and_counts_add_up(
    tmp_path: Path, pools: dict[int, WorkerPool], workers: int
) -> None:
    data = _data()
    result = Engine(_plan(), "segment", pool=pools[workers], packet_rows=250).run(
        {"s": data}, timeout=60)
    path = tmp_path / "metrics.jsonl"
    n = JsonLinesWriter(path).write(result.metrics)
    lines = path.read_text().splitlines()
    assert len(lines) == n
    events = [json.loads(line) for line in lines]
    assert events == read_json_lines(path)
    summary = events[-1]
    assert summary["event"] == "summary"
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for e in events[:-1]:
        by_kind[e["event"]].append(e)
    assert set(by_kind) == {"arrival", "operator", "queues", "output"}
    # Input: every row arrived once.
    assert sum(e["rows"] for e in by_kind["arrival"]) == summary["input_rows"] == data.num_rows
    # Output: the events add up to the summary and to what the sink collected.
    out_rows = sum(e["rows"] for e in by_kind["output"])
    assert out_rows == summary["output_rows"]
    assert out_rows == sum(t.num_rows for t in result.outputs.values())
    # Operators: per-operator sums equal the summary; a consumer reads what its producer wrote.
    ops = summary["operators"]
    for op in ("f", "m", "w", "p"):
        mine = [e for e in by_kind["operator"] if e["op"] == op]
        assert sum(e["rows_in"] for e in mine) == ops[op]["rows_in"]
        assert sum(e["rows_out"] for e in mine) == ops[op]["rows_out"]
        assert ops[op]["packets"] == len(mine) == 16
    assert ops["f"]["rows_in"] == ops["p"]["rows_in"] == data.num_rows
    assert ops["m"]["rows_in"] == ops["f"]["rows_out"] == 30 * data.num_rows // 100
    assert ops["w"]["rows_in"] == ops["m"]["rows_out"]
    # Queue samples: totals are the sums of the per-queue numbers, never negative.
    for e in by_kind["queues"]:
        assert e["rows"] == sum(v[0] for v in e["per_queue"].values()) >= 0
        assert e["bytes"] == sum(v[1] for v in e["per_queue"].values()) >= 0
    assert summary["peak_queue_bytes"] == max(e["bytes"] for e in by_kind["queues"])
    lat = summary["latency"]
    assert 0 <= lat["p50"] <= lat["p99"] <= lat["max"]
    assert summary["workers"] == workers
    assert summary["strategy"] == "segment"


def test_progress_dict_is_flat_and_json_ready(pools: dict[int, WorkerPool]) -> None:
    result = Engine(_plan(), "fifo", pool=pools[2], packet_rows=500).run({"s": _data()})
    progress = result.metrics.progress()
    assert all(isinstance(v, int | float | str) for v in progress.values())
    json.dumps(progress)
    assert progress["op.f.rows_in"] == 4000
    assert progress["output_rows"] == sum(t.num_rows for t in result.outputs.values())
    assert progress["latency_p99"] >= 0


def test_learned_statistics_are_the_measured_selectivity_and_sizes(
    pools: dict[int, WorkerPool]
) -> None:
    result = Engine(_plan(), "path_capacity", pool=pools[1], packet_rows=400).run(
        {"s": _data()})
    stats = result.stats
    assert stats["f"].selectivity == pytest.approx(0.3)
    assert stats["m"].selectivity == 1.0
    assert stats["p"].input_tuple_size == pytest.approx(16.0)  # two int64 columns
    assert stats["p"].output_tuple_size == pytest.approx(8.0)
    assert all(stats[op].cost > 0 for op in ("f", "m", "p"))
    # Feeding them back into the next run is accepted and changes nothing in the output.
    again = Engine(_plan(), "path_capacity", pool=pools[1], packet_rows=400, stats=stats).run(
        {"s": _data()})
    assert again.outputs["w"].equals(result.outputs["w"])


def test_timeline_buckets_and_weighted_quantile() -> None:
    m = PlanMetrics(["a"], strategy="x")
    m.arrival(0.0, "s", 10, 80)
    m.queues(0.0, {"s->a": (10, 80)})
    m.queues(0.6, {"s->a": (0, 0)})
    m.output(0.5, "a", 4, 0.0)
    m.output(1.5, "a", 6, 1.0)
    tl = m.timeline(1.0)
    assert tl["output_rate"].tolist() == [4.0, 6.0]
    assert tl["latency"].tolist() == [0.5, 0.5]
    assert tl["memory_peak"][0] == 80
    assert math.isnan(tl["memory_peak"][1])
    assert weighted_quantile(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 98.0]), 0.5) == 3.0
    out = io.StringIO()
    assert JsonLinesWriter(out).write(m) == 6  # five events and the summary
    assert out.getvalue().count("\n") == 6


def test_operator_queues_over_time() -> None:
    m = PlanMetrics(["a", "b"])
    m.queues(0.1, {"s->a": (10, 80), "a->b": (0, 0)})
    m.queues(0.2, {"s->a": (4, 32), "a->b": (6, 48)})
    m.queues(1.5, {"s->a": (0, 0), "a->b": (1, 8)})
    per_op = m.operator_queues(1.0)
    assert per_op["a"]["rows"].tolist() == [10.0, 0.0]
    assert per_op["b"]["bytes"].tolist() == [48.0, 8.0]
