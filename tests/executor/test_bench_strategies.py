"""Smoke test: ``spark-stream-sched bench strategies --quick`` writes PNG plots and a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_stream_sched.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAMES = ["fifo", "chain", "path_capacity", "simplified_segment", "threshold"]


@pytest.mark.slow
@pytest.mark.bench
def test_bench_strategies_quick_writes_plots_and_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "img"
    code = main(["bench", "strategies", "--quick", "--no-progress", "--out", str(out),
                 "--seconds", "0.3", "--steps", "60", "--strategies", ",".join(NAMES),
                 "--json", str(tmp_path / "r.json")])
    assert code == 0
    pngs = sorted(p.name for p in out.glob("strategies_*.png"))
    assert pngs == sorted(f"strategies_{src}_{m}.png" for src in ("simu", "exec")
                          for m in ("latency", "memory", "output"))
    for name in pngs:
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    table = capsys.readouterr().out
    for name in NAMES:
        assert table.count(f" {name} ") == 2  # one row per source
    assert "mean latency" in table
    assert "p99 latency" in table
    assert "peak memory" in table
    assert "throughput" in table
    rows = json.loads((tmp_path / "r.json").read_text())
    assert {(r["source"], r["strategy"]) for r in rows} == {
        (s, n) for s in ("simulator", "executor") for n in NAMES}
    real = [r for r in rows if r["source"] == "executor"]
    # The same input reaches the sink under every strategy.
    assert len({r["output"] for r in real}) == 1
    assert all(r["peak_memory"] > 0 for r in rows)


def test_workload_plan_realises_its_selectivities_on_the_executor() -> None:
    from spark_stream_sched.bench import strategies as bench
    from spark_stream_sched.runtime.executor import Engine

    plan = bench.workload_plan(4, 3, seed=3)
    counts = bench.real_counts(plan, 1.0, capacity=150_000, steps=20, tick=0.05, seed=3)
    packets, schedule = bench.executor_inputs(counts, 0.05, seed=3)
    assert all(len(packets[s]) == len(schedule[s]) for s in packets)
    result = Engine(plan, "path_capacity").run(packets, timeout=60)
    totals = result.metrics.summary()["operators"]
    for op in plan.operators:
        d = plan[op]
        if totals[op]["rows_in"] >= 2000:  # enough tuples for a 0.05 tolerance
            assert result.stats[op].selectivity == pytest.approx(d.selectivity, abs=0.05), op
    assert any(totals[op]["rows_in"] >= 2000 for op in plan.operators)
