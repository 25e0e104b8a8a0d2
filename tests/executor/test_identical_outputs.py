"""Every strategy and worker count gives the output of a sequential evaluation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.executor import Engine, WorkerPool
from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan
from spark_stream_sched.runtime.scheduler import strategy_names
from tests.executor.oracle import sequential
from tests.executor.plans import inputs, plans

TIMEOUT = 60.0


def run_all(plan: QueryPlan, data: dict[str, pa.Table], strategy: str, pool: WorkerPool,
            packet_rows: int) -> dict[str, pa.Table]:
    engine = Engine(plan, strategy, pool=pool, packet_rows=packet_rows)
    return engine.run(data, timeout=TIMEOUT).outputs


def expected(plan: QueryPlan, data: dict[str, pa.Table]) -> dict[str, pa.Table]:
    ops = Engine(plan).build_operators({s: t.schema for s, t in data.items()})
    return sequential(plan, data, {op: o.output_schema for op, o in ops.items()})


def assert_same(got: dict[str, pa.Table], want: dict[str, pa.Table], label: str) -> None:
    assert sorted(got) == sorted(want), label
    for root, table in want.items():
        assert got[root].to_pylist() == table.to_pylist(), f"{label}: root {root}"
        assert got[root].schema.equals(table.schema), f"{label}: schema of {root}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), s0=inputs(), s1=inputs(), packet_rows=st.integers(1, 60),
       workers=st.lists(st.integers(1, 3), min_size=len(strategy_names()),
                        max_size=len(strategy_names())))
def test_every_strategy_equals_sequential_evaluation(
    pools: dict[int, WorkerPool], plan: QueryPlan, s0: pa.Table, s1: pa.Table,
    packet_rows: int, workers: list[int],
) -> None:
    data = {s: t for s, t in (("s0", s0), ("s1", s1)) if s in plan.streams}
    want = expected(plan, data)
    for name, n in zip(strategy_names(), workers, strict=True):
        got = run_all(plan, data, name, pools[n], packet_rows)
        assert_same(got, want, f"{name} with {n} workers")


def _hex(table: pa.Table) -> list[dict]:
    return [{k: v.hex() if isinstance(v, float) else v for k, v in r.items()}
            for r in table.to_pylist()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.one_of(st.none(), st.floats(allow_nan=False), st.sampled_from(
           [0.1, 0.2, 0.3, 1e16, -1e16, 1.0, 1e308])), min_size=1, max_size=150),
       packet_rows=st.integers(1, 40), strategy=st.sampled_from(strategy_names()),
       workers=st.integers(1, 3), seed=st.integers(0, 2 ** 31))
def test_float_sums_follow_the_rule_whatever_the_packets(
    pools: dict[int, WorkerPool], values: list, packet_rows: int, strategy: str,
    workers: int, seed: int,
) -> None:
    """Window sums/averages and running sums of a float column are exactly rounded."""
    rng = np.random.default_rng(seed)
    n = len(values)
    data = {"s": pa.table({"ts": pa.array(np.sort(rng.integers(0, 20_000, n)), pa.int64()),
                           "k": pa.array(rng.integers(0, 3, n), pa.int64()),
                           "v": pa.array(values, pa.float64())})}
    plan = QueryPlan([
        OperatorDef("w", OperatorKind.WINDOW_AGGREGATE, ("s",),
                    params={"size": 4000, "slide": 1000, "keys": ["k"],
                            "aggregates": ["sum(v) as sv", "avg(v) as av"]}),
        OperatorDef("r", OperatorKind.KEYED, ("s",),
                    params={"keys": ["k"], "function": "running_sum", "column": "v"}),
    ])
    got = run_all(plan, data, strategy, pools[workers], packet_rows)
    want = expected(plan, data)
    assert {root: _hex(t) for root, t in got.items()} == {root: _hex(t) for root, t in
                                                           want.items()}


def _fixed_case() -> tuple[QueryPlan, dict[str, pa.Table]]:
    n = 3000
    data = pa.table({"ts": pa.array(range(0, 10 * n, 10), pa.int64()),
                     "k": pa.array([i % 7 for i in range(n)], pa.int64()),
                     "x": pa.array([(i * 37) % 101 for i in range(n)], pa.int64())})
    ops = [
        OperatorDef("f", OperatorKind.FILTER, ("s",), params={"predicate": "x < 80"}),
        OperatorDef("m", OperatorKind.MAP, ("f",),
                    params={"column": "y", "function": "multiply", "args": ["x", 2]}),
        OperatorDef("w", OperatorKind.WINDOW_AGGREGATE, ("m",),
                    params={"size": "2s", "slide": "500ms", "keys": ["k"],
                            "aggregates": ["count(*) as n", "sum(y) as s", "first(x) as f",
                                           "last(x) as l"]}),
        OperatorDef("g", OperatorKind.FILTER, ("s",), params={"predicate": "k = 3 or x > 50"}),
        OperatorDef("r", OperatorKind.KEYED, ("g",),
                    params={"keys": ["k"], "function": "running_sum", "column": "x"}),
        OperatorDef("p", OperatorKind.PROJECT, ("s",), params={"columns": ["ts", "x"]}),
    ]
    return QueryPlan(ops), {"s": data}


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("strategy", strategy_names())
def test_fixed_plan_every_strategy_and_worker_count(
    pools: dict[int, WorkerPool], strategy: str, workers: int
) -> None:
    plan, data = _fixed_case()
    got = run_all(plan, data, strategy, pools[workers], packet_rows=97)
    assert_same(got, expected(plan, data), f"{strategy} with {workers} workers")
    assert got["w"].num_rows > 0
    assert got["r"].num_rows > 0


def test_default_packets_are_half_the_l2_cache() -> None:
    """Packet rows = half the L2 cache (read here with ``getconf``) / 24 bytes (three int64)."""
    import shutil
    import subprocess

    if shutil.which("getconf") is None:
        pytest.skip("getconf is not installed: no independent reading of the L2 size")
    reading = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True,
                             check=True).stdout.strip()
    if not reading.isdigit() or int(reading) <= 0:
        pytest.skip(f"getconf reports no L2 cache size here ({reading!r})")
    plan, _ = _fixed_case()
    want = max(64, int(reading) // 2 // 24)
    n = 3 * want + 5  # several full packets and a partial one
    table = pa.table({c: pa.array(np.arange(n), pa.int64()) for c in ("ts", "k", "x")})
    packets = Engine(plan).packets(table)
    assert [len(p) for p in packets] == [want, want, want, 5]
