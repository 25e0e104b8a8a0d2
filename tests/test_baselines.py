"""The per-tuple baselines: heapq.merge order, the MQ aggregate, and MQ == the runtime."""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.data.soundcloud import IP_REGEX, MAIL_REGEX, soundcloud_streams
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.baselines import (
    MQAggregate,
    heapq_merge,
    heapq_merge_order,
    mq_aggregate,
    results_difference,
)

SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("v", pa.float64()),
                    ("s", pa.string())])
AGGS = ["count(*) as n", "count(v) as nv", "sum(v) as total", "avg(v) as mean",
        "min(v) as lo", "max(v) as hi", "first(v) as f", "last(v) as l",
        "count_where(s contains 'x') as nx", "first_where(v, s rlike '^x[0-9]') as fx",
        "last_where(s, v > 5) as lb"]


def _inputs(seed: int, n_inputs: int = 3, rows: int = 40) -> list[pa.Table]:
    rng = random.Random(seed)
    tables = []
    for _ in range(n_inputs):
        ts = sorted(rng.randrange(0, 60) for _ in range(rng.randrange(0, rows)))
        tables.append(pa.table({
            "ts": pa.array(ts, pa.int64()),
            "k": pa.array([rng.randrange(3) for _ in ts], pa.int64()),
            "v": pa.array([rng.choice([None, *range(10)]) for _ in ts], pa.float64()),
            "s": [rng.choice(["x1", "ax", "b", "x", "y2"]) for _ in ts],
        }, schema=SCHEMA))
    return tables


def _brute_force(inputs: list[pa.Table], size: int, slide: int) -> list[dict[str, Any]]:
    """Reference: rows in (ts, input, seq) order, every (window, key), folded by hand."""
    rows = sorted((r["ts"], i, seq, r) for i, t in enumerate(inputs)
                  for seq, r in enumerate(t.to_pylist()))
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for ts, _, _, row in rows:
        for start in range((ts - size) // slide * slide + slide, ts + 1, slide):
            groups.setdefault((start, row["k"]), []).append(row)
    out = []
    for (start, key), rs in sorted(groups.items()):
        vs = [r["v"] for r in rs if r["v"] is not None]
        fx = [r["v"] for r in rs if re.search("^x[0-9]", r["s"])]
        lb = [r["s"] for r in rs if r["v"] is not None and r["v"] > 5]
        out.append({
            "window_start": start, "window_end": start + size, "k": key, "n": len(rs),
            "nv": len(vs), "total": sum(vs) if vs else None,
            "mean": sum(vs) / len(vs) if vs else None, "lo": min(vs, default=None),
            "hi": max(vs, default=None), "f": rs[0]["v"], "l": rs[-1]["v"],
            "nx": sum("x" in r["s"] for r in rs), "fx": fx[0] if fx else None,
            "lb": lb[-1] if lb else None,
        })
    return out


@pytest.mark.parametrize("seed", range(5))
def test_heapq_merge_is_the_total_order(seed: int) -> None:
    inputs = _inputs(seed, n_inputs=4)
    order = heapq_merge_order(inputs)
    keys = [(ts, i, seq) for i, t in enumerate(inputs)
            for seq, ts in enumerate(t.column("ts").to_pylist())]
    assert order == sorted(keys)
    merged = heapq_merge(inputs)
    assert list(zip(merged.column("ts").to_pylist(), merged.column("__input").to_pylist(),
                    merged.column("__seq").to_pylist(), strict=True)) == order
    assert merged.column("k").to_pylist() == [inputs[i].column("k")[s].as_py()
                                              for _, i, s in order]


@pytest.mark.parametrize("seed", range(8))
def test_mq_processes_in_heapq_order_whatever_the_arrivals(seed: int) -> None:
    inputs = _inputs(seed)
    rng = random.Random(seed)
    mq = MQAggregate(len(inputs), 10, 5, ["k"], ["count(*) as n"], SCHEMA, trace=True)
    positions = [0] * len(inputs)
    open_inputs = list(range(len(inputs)))
    while open_inputs:
        i = rng.choice(open_inputs)
        step = rng.randrange(1, 6)
        mq.add(i, inputs[i].slice(positions[i], step))
        positions[i] += step
        if positions[i] >= inputs[i].num_rows:
            mq.finish(i)
            open_inputs.remove(i)
        mq.smerge_update_output()
    assert mq.processed == [(i, seq) for _, i, seq in heapq_merge_order(inputs)]


def test_mq_waits_for_every_unfinished_input() -> None:
    inputs = _inputs(1, n_inputs=2, rows=30)
    mq = MQAggregate(2, 10, 5, ["k"], ["count(*) as n"], SCHEMA)
    mq.add(0, inputs[0])
    assert mq.smerge_update_output() == 0
    mq.finish(1)
    assert mq.smerge_update_output() == inputs[0].num_rows


@pytest.mark.parametrize(("seed", "size", "slide"), [(0, 10, 5), (1, 7, 3), (2, 6, 6), (3, 20, 2)])
def test_mq_results_equal_a_brute_force_fold(seed: int, size: int, slide: int) -> None:
    inputs = _inputs(seed)
    result = mq_aggregate(inputs, size, slide, ["k"], AGGS, batch_rows=3)
    assert result.to_pylist() == _brute_force(inputs, size, slide)


def _runtime(inputs: list[pa.Table], size: int, slide: int, key: str, aggs: list[str],
             batch_rows: int) -> pa.Table:
    query = OrderedAggregation(len(inputs), WindowSpec(size, slide), [key], aggs,
                               input_schema=inputs[0].schema)
    out = []
    for lo in range(0, max(t.num_rows for t in inputs), batch_rows):
        for i, table in enumerate(inputs):
            query.push(i, table.slice(lo, batch_rows))
        out.append(query.poll())
    for i in range(len(inputs)):
        query.finish(i)
    out.append(query.poll())
    return pa.concat_tables(out)


SMART_GRID_QUERIES = [
    (30_000, 3_000, ["first(value) as f"]),
    (20_000, 2_000, ["first(value) as f"]),
    (40_000, 2_000, ["avg(value) as mean", "count(*) as n"]),
    (30_000, 3_000, ["count(*) as n", "avg(value) as mean", "first(value) as f",
                     "count_where(kind = 'alarm') as alarms", "last(value) as l"]),
]


@pytest.mark.parametrize(("seed", "batch_rows"), [(11, 700), (0, 100_000)])
@pytest.mark.parametrize(("size", "slide", "aggs"), SMART_GRID_QUERIES)
def test_runtime_equals_mq_on_smart_grid(size: int, slide: int, aggs: list[str], seed: int,
                                         batch_rows: int) -> None:
    inputs = smart_grid_streams(8, rows=20_000, null_rate=0.02, alarm_rate=0.01, seed=seed)
    expected = mq_aggregate(inputs, size, slide, ["meter"], aggs)
    actual = _runtime(inputs, size, slide, "meter", aggs, batch_rows)
    assert expected.num_rows > 0
    assert results_difference(actual, expected) is None


MAIL, IP = f"text rlike '{MAIL_REGEX}'", f"text rlike '{IP_REGEX}'"
COMMENT_QUERIES = [
    (30_000, 3_000, ["first(text) as f", "count(*) as n"]),
    (20_000, 2_000, [f"first_where(text, {MAIL}) as fm", f"count_where({MAIL}) as nm"]),
    (20_000, 2_000, [f"first_where(text, {MAIL} or {IP}) as fmi",
                     f"count_where({MAIL} or {IP}) as nmi",
                     "count_where(text contains 'so') as c"]),
]


@pytest.mark.parametrize(("size", "slide", "aggs"), COMMENT_QUERIES)
def test_runtime_equals_mq_on_comments(size: int, slide: int, aggs: list[str]) -> None:
    inputs = soundcloud_streams(6, 8_000, n_songs=500, mail_rate=0.2, ip_rate=0.1, seed=12)
    expected = mq_aggregate(inputs, size, slide, ["song"], aggs)
    actual = _runtime(inputs, size, slide, "song", aggs, batch_rows=500)
    assert expected.num_rows > 0
    assert results_difference(actual, expected) is None


def test_results_difference_reports_values_and_tolerates_float_rounding() -> None:
    a = pa.table({"x": [1, 2], "m": [0.1 + 0.2, 1.0]})
    b = pa.table({"x": [1, 2], "m": [0.3, 1.0]})
    assert results_difference(a, b) is None
    c = pa.table({"x": [1, 3], "m": [0.3, 1.0]})
    assert results_difference(a, c) == "row 1, column 'x': 2 vs 3"
    assert "row counts" in str(results_difference(a, a.slice(1)))
    assert np.isclose(a.column("m")[0].as_py(), 0.3)
