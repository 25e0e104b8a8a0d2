"""The benchmarks run end to end and report positive rates (no timing thresholds)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_stream_sched.bench import merge, window
from spark_stream_sched.bench.common import QUICK_WARNING
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
    cases = ["k-OS", "F-OI", "sg-sliding", "sg-sliding-plain"]
    results = window.run(queries=cases, rows=4_000, n_inputs=3, baseline_rows=1_500, repeat=1,
                         show_progress=False)
    assert [r["case"] for r in results] == cases
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


def _fake_benches(monkeypatch: pytest.MonkeyPatch,
                  record: Callable[[str, argparse.Namespace], object]) -> None:
    """Replace every benchmark of ``ALL`` by one that calls ``record(name, args)`` and returns
    one row, formatted as ``table of <name>``."""
    import dataclasses

    from spark_stream_sched.commands import bench as command

    def recorder(name: str) -> Callable[[argparse.Namespace], list[dict[str, str]]]:
        def run(args: argparse.Namespace) -> list[dict[str, str]]:
            record(name, args)
            return [{"bench": name, "case": name}]
        return run

    for name in command.ALL:
        fake = dataclasses.replace(command.BENCHES[name], run=recorder(name),
                                   format=lambda rows, name=name: f"table of {name}")
        monkeypatch.setitem(command.BENCHES, name, fake)


def test_cli_bench_all_runs_every_benchmark_with_its_own_defaults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench all`` dispatches to every benchmark of ``ALL`` (merge, window, strategies, spark,
    keyed) with each one's own defaults (each runs for real in its own test; strategies and
    spark take minutes, so their runners are replaced by recorders here)."""
    from spark_stream_sched.commands import bench as command

    seen: list[tuple[str, bool, int, bool]] = []
    _fake_benches(monkeypatch, lambda name, args: seen.append(
        (name, args.quick, args.seed, args.rows is None)))
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


def test_a_quick_run_says_first_and_last_that_its_figures_are_not_measurements(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``bench merge --quick`` for real: the warning, the table with its speed-ups, the warning;
    beside JSON on stdout the warning goes to stderr; a run without ``--quick`` has none."""
    assert main(["bench", "merge", "--quick", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == lines[-1] == QUICK_WARNING
    assert "speed-up" in lines[1]
    assert [line for line in lines if "inputs  20,000" in line]  # the quick sizes ran
    assert sum(QUICK_WARNING in line for line in lines) == 2
    assert main(["bench", "merge", "--quick", "--no-progress", "--inputs", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["rows"] == 20_000  # stdout holds the JSON alone
    assert captured.err.splitlines().count(QUICK_WARNING) == 2
    assert main(["bench", "merge", "--no-progress", "--inputs", "2", "--rows", "2000"]) == 0
    assert QUICK_WARNING not in capsys.readouterr().out


def test_every_bench_quick_run_prints_the_warning_before_and_after_its_table(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``bench`` sub-command reports through ``run_and_report``: with ``--quick`` the
    warning comes first and last, before the run starts and after the table (the runners are
    replaced by recorders; each runs for real in its own test); ``bench all --quick`` warns
    once around all of them."""
    from spark_stream_sched.commands import bench as command

    started: list[tuple[str, str]] = []  # (bench, what was printed before its run started)
    _fake_benches(monkeypatch, lambda name, args: started.append(
        (name, capsys.readouterr().out)))
    for name in command.ALL:
        assert main(["bench", name, "--quick"]) == 0
        assert capsys.readouterr().out == f"table of {name}\n{QUICK_WARNING}\n"
        assert main(["bench", name]) == 0
        assert capsys.readouterr().out == f"table of {name}\n"
    assert started == [(name, printed) for name in command.ALL
                       for printed in (f"{QUICK_WARNING}\n", "")]
    started.clear()
    assert main(["bench", "all", "--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert started == [(name, f"{QUICK_WARNING}\n" if name == command.ALL[0] else "")
                       for name in command.ALL]
    assert lines[-1] == QUICK_WARNING
    assert QUICK_WARNING not in lines[:-1]


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


def test_quick_runs_write_their_plots_outside_docs_img() -> None:
    """A smoke run from a checkout must not replace the measured plots under ``docs/img``."""
    from spark_stream_sched.bench.common import plot_path, quick_plot_dir

    Namespace = argparse.Namespace

    default = "docs/img/bench_keyed.png"
    assert plot_path(Namespace(quick=False, plot=None), "plot", default) == default
    assert plot_path(Namespace(quick=True, plot=None), "plot", default) == str(
        quick_plot_dir() / "bench_keyed.png")
    assert plot_path(Namespace(quick=True, plot="mine.png"), "plot", default) == "mine.png"
    assert plot_path(Namespace(quick=True, plot_dir=""), "plot_dir", "docs/img") == ""
    assert plot_path(Namespace(quick=True, out=None), "out", "docs/img") == str(quick_plot_dir())
    assert "docs" not in quick_plot_dir().parts
