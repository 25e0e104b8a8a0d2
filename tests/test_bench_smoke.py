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


def test_cli_bench_all_quick_writes_json_and_prints_tables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    code = main(["bench", "all", "--quick", "--no-progress", "--queries", "K-OS,w-OI",
                 "--inputs", "3", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "S-Merge t/s" in printed
    assert "runtime t/s" in printed
    results = json.loads(out.read_text())
    assert [r["case"] for r in results] == ["2 inputs", "8 inputs", "20 inputs", "64 inputs",
                                            "K-OS", "w-OI"]
    for result in results:
        _check_rates(result)


def test_cli_bench_json_to_stdout_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "merge", "--quick", "--no-progress", "--inputs", "2",
                 "--rows", "1000", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results[0]["rows"] == 1_000
    assert main(["bench", "window", "--quick", "--no-progress", "--queries", "nope"]) == 2
    assert "unknown window queries" in capsys.readouterr().err
    assert main(["bench"]) == 2
