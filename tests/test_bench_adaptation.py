"""``bench adaptation`` and ``bench join`` at tiny sizes: outputs equal the oracle, plots written.

No timing thresholds: the checks are the benches' own correctness columns (every run's result
multiset equals the batch oracle, counts are identical across repeats), the shape of the
report, and that the bench's external push driver is the join's own disk adaptation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from spark_stream_sched.bench import adaptation, join_alone
from spark_stream_sched.bench.adaptation_data import (
    Workload,
    expected_results,
    generate,
    make_join,
    oracle_ids,
    uniform,
)
from spark_stream_sched.bench.adaptation_run import Run, batches, run_disk
from spark_stream_sched.cli import main

TINY = adaptation.Sizes(rows=600, repeat=2, seed=1, groups=12, batch_rows=200,
                        budget_share=0.4)


@pytest.mark.slow
@pytest.mark.bench
def test_adaptation_bench_outputs_equal_the_oracle_and_plots_are_written(tmp_path: Path) -> None:
    results = adaptation.run(TINY, list(adaptation.FIGURES), str(tmp_path))
    rows = [r for r in results if r["figure"] != "machine"]
    assert {r["figure"] for r in rows} == set(adaptation.FIGURES)
    assert all(r["output_equal"] is True for r in rows)
    assert all(r["deterministic"] is True for r in rows)
    by = {(r["figure"], r["config"]): r for r in rows}
    assert by["fig9", "0%-push"]["pushes"] == 0
    assert by["fig9", "90%-push"]["pushes"] > 0
    assert by["fig9", "90%-push"]["cleanup_results"] > 0
    low, high = by["fig11", "30%-Low-OutputRate"], by["fig11", "30%-High-OutputRate"]
    assert low["normal_results"] + low["cleanup_results"] == (
        high["normal_results"] + high["cleanup_results"])
    assert by["fig16", "Distributed-Adapt"]["adaptations"] > 0
    assert by["fig16", "No-Distributed-Adapt"]["moves"] == 0
    assert by["fig16", "Distributed-Adapt"]["balance"] > by[
        "fig16", "No-Distributed-Adapt"]["balance"]
    assert by["fig21", "active-disk"]["pushes"] > 0
    for figure in adaptation.FIGURES:
        assert (tmp_path / f"adapt_{figure}.png").stat().st_size > 10_000
    text = adaptation.format_results(results)
    assert "clean-up High/Low: tuples x" in text
    assert "(paper x5.11)" in text


def test_the_oracle_check_can_fail() -> None:
    expected = np.array([[0, 0, 0], [1, 1, 1]])
    lost = Run(ids=expected[:1], curve=[1], memory=[[1]])
    duplicated = Run(ids=np.array([[0, 0, 0], [0, 0, 0]]), curve=[1], memory=[[1]])
    for run in (lost, duplicated):
        assert adaptation._summary("fig9", "x", 3, [run], expected)["output_equal"] is False
    other = Run(ids=expected, curve=[2], memory=[[1]])
    row = adaptation._summary("fig9", "x", 3, [Run(ids=expected, curve=[1], memory=[[1]]),
                                                other], expected)
    assert row["output_equal"] is True
    assert row["deterministic"] is False


def test_the_low_output_rate_driver_is_the_joins_own_disk_adaptation(tmp_path: Path) -> None:
    """``run_disk(order='low')`` pushes exactly what ``Join(memory_budget=...)`` pushes."""
    workload = Workload(600, 12, tuple((4.0, 1.0)[g % 2] for g in range(12)), (uniform(12),),
                        300, seed=3)
    table = generate(workload)
    budget = 4_000
    builtin = make_join(12, spill_dir=str(tmp_path), memory_budget=budget)
    out = [builtin.update(table.slice(lo, n), None) for lo, n in batches(table, 150)]
    out.append(builtin.finish())
    driven = run_disk(table, 12, budget, 0.3, "low", 150)
    assert builtin.counts.pushes == driven.pushes > 0
    ids = np.stack([pa.concat_tables(out).column(f"row_{j}").to_numpy() for j in range(3)], 1)
    assert driven.ids is not None
    assert np.array_equal(ids[np.lexsort(ids.T[::-1])], driven.ids)
    assert driven.curve[-1] == sum(t.num_rows for t in out[:-1])


def test_generated_groups_follow_the_join_ratio() -> None:
    workload = Workload(900, 6, (3.0,) * 6, (uniform(6),), 450, seed=0)
    table = generate(workload)
    assert table.num_rows == 2_700
    assert table.column("__input").to_pylist()[:6] == [0, 1, 2, 0, 1, 2]
    found = len(oracle_ids(table, 6))
    assert 0.6 < found / expected_results(workload) < 1.4  # 900^3 * 9 / 450^2 = 32,400


def test_cli_bench_adaptation_quick_writes_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "adapt.json"
    assert main(["bench", "adaptation", "--quick", "--no-progress", "--rows", "450",
                 "--groups", "9", "--batches", "4", "--figures", "fig16,fig21",
                 "--plot-dir", str(tmp_path / "img"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["figure"] for r in rows} == {"machine", "fig16", "fig21"}
    assert all(r["output_equal"] for r in rows if r["figure"] != "machine")
    assert sorted(p.name for p in (tmp_path / "img").iterdir()) == ["adapt_fig16.png",
                                                                    "adapt_fig21.png"]
    assert main(["bench", "adaptation", "--quick", "--no-progress", "--figures", "fig7"]) == 2


def test_join_bench_engines_agree_with_each_other_and_the_oracle() -> None:
    for bucketed in (True, False):
        results = join_alone.run(rows=1_200, repeat=1, seed=2, batch_rows=500,
                                 bucketed=bucketed)
        assert {r["case"] for r in results} == {"2-way unwindowed", "2-way windowed",
                                                "3-way unwindowed", "3-way windowed"}
        assert {r["engine"] for r in results} == {"runtime", "pandas", "duckdb"}
        assert all(r["equal"] is True for r in results)
        assert all(r["oracle_equal"] is True for r in results)
        assert all(r["results"] > 0 and r["tuples_per_s"] > 0 for r in results)
    assert "DuckDB (1 thread)" in join_alone.format_results(results)
