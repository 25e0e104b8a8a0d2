"""The benchmarks run end to end and report positive rates (no timing thresholds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_stream_sched.bench import merge, window
from spark_stream_sched.cli import main
from spark_stream_sched.errors import ConfigError


def _check_rates(result: dict[str, object]) -> None:
    assert float(result["rows_per_s"]) > 0  # type: ignore[arg-type]
    assert float(result["baseline_rows_per_s"]) > 0  # type: ignore[arg-type]
    assert float(result["ratio"]) > 0  # type: ignore[arg-type]


def test_merge_bench_reports_rates_and_same_order() -> None:
    results = merge.run(input_counts=(2, 5), rows=4_000, baseline_rows=2_000, repeat=1,
                        show_progress=False)
    assert [r["inputs"] for r in results] == [2, 5]
    for result in results:
        _check_rates(result)
        assert result["rows"] == 4_000
        assert result["baseline_rows"] == 2_000
        assert result["same_order"] is True
    assert "heapq.merge measured on fewer rows" in merge.format_results(results)


def test_window_bench_reports_rates_and_matching_results() -> None:
    results = window.run(queries=["k-OS", "F-OI", "sg-sliding"], rows=4_000, n_inputs=3,
                         baseline_rows=1_500, repeat=1, show_progress=False)
    assert [r["case"] for r in results] == ["k-OS", "F-OI", "sg-sliding"]
    for result in results:
        _check_rates(result)
        assert result["match"] is True, result["difference"]
        assert result["output_rows"] > 0
    table = window.format_results(results)
    assert "sg-sliding" in table
    assert "MQ measured on fewer rows" in table


def test_window_bench_rejects_unknown_queries() -> None:
    with pytest.raises(ConfigError, match="unknown window queries"):
        window.run(queries=["x-OS"], rows=10, show_progress=False)


def test_cli_bench_all_runs_every_benchmark_with_its_own_defaults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench all`` dispatches to every benchmark of ``ALL`` (merge, window, strategies, spark,
    keyed) with each one's own defaults (each runs for real in its own test; strategies and
    spark take minutes, so their runners are replaced by recorders here)."""
    import dataclasses

    from spark_stream_sched.commands import bench as command

    seen: list[tuple[str, bool, int, bool]] = []

    def recorder(name: str):  # noqa: ANN202
        def run(args):  # noqa: ANN001, ANN202
            seen.append((name, args.quick, args.seed, args.rows is None))
            return [{"bench": name, "case": name}]
        return run

    for name in command.ALL:
        fake = dataclasses.replace(command.BENCHES[name], run=recorder(name),
                                   format=lambda rows, name=name: f"table of {name}")
        monkeypatch.setitem(command.BENCHES, name, fake)
    out = tmp_path / "bench.json"
    assert main(["bench", "all", "--quick", "--seed", "3", "--json", str(out)]) == 0
    assert "keyed" in command.ALL
    assert seen == [(name, True, 3, True) for name in command.ALL]
    assert [r["bench"] for r in json.loads(out.read_text())] == list(command.ALL)
    printed = capsys.readouterr().out
    assert "== spark:" in printed
    assert "table of strategies" in printed


def test_cli_bench_json_to_stdout_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "merge", "--quick", "--no-progress", "--inputs", "2",
                 "--rows", "1000", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results[0]["rows"] == 1_000
    assert main(["bench", "window", "--quick", "--no-progress", "--queries", "nope"]) == 2
    assert "unknown window queries" in capsys.readouterr().err
    assert main(["bench"]) == 2


@pytest.mark.slow
@pytest.mark.bench
def test_cli_bench_keyed_quick_reports_every_part(tmp_path: Path) -> None:
    """``bench keyed --quick``: wait, latency, cpu and pipeline parts, the plot, equal outputs."""
    out, png = tmp_path / "keyed.json", tmp_path / "keyed.png"
    assert main(["bench", "keyed", "--quick", "--no-progress", "--rows", "4096",
                 "--json", str(out), "--plot", str(png)]) == 0
    results = json.loads(out.read_text())
    parts = {r["part"] for r in results}
    assert parts == {"machine", "wait", "latency", "cpu", "pipeline"}
    wait = [r for r in results if r["part"] == "wait"]
    assert {r["queue"] for r in wait} == {"hybrid", "partitioned"}
    assert {r["placement"] for r in wait} == {"adjacent", "colliding"}
    assert all(r["tuples_per_s"] > 0 for r in wait)
    assert all(r["hybrid_vs_partitioned"] > 0 for r in wait
               if r["queue"] == "hybrid" and r["workers"] > 1)
    latency = [r for r in results if r["part"] == "latency"]
    assert {r["workers"] for r in latency} == {1, 2}
    assert all(0 < r["latency_median_ms"] <= r["latency_p95_ms"] for r in latency)
    assert all(r["identical"] is True for r in results if r["part"] == "pipeline")
    assert png.stat().st_size > 10_000
