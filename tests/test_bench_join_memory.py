"""``bench join-memory``: every budget in its own process, the same results, figures reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_stream_sched.cli import main


def test_each_budget_runs_in_its_own_process_with_the_same_results(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    assert main(["bench", "join-memory", "--quick", "--budgets", "none,64k", "--no-progress",
                 "--json", str(out)]) == 0
    none, small = json.loads(out.read_text())
    assert (none["budget"], small["budget"]) == ("none", "64 KiB")
    assert none["results"] == small["results"] > 0
    assert (none["pushes"], none["cleanup_results"]) == (0, 0)
    assert min(small["pushes"], small["pushed_mb"], small["cleanup_results"]) > 0
    assert small["stats"]["pushed_bytes"] == small["pushed_mb"] * 2**20
    assert all(r["peak_mb"] > 0 and r["inputs_mb"] > 0 for r in (none, small))


def test_finish_as_one_table_or_in_parts_gives_the_same_results(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    assert main(["bench", "join-memory", "--quick", "--budgets", "64k", "--finish",
                 "table,parts", "--no-progress", "--json", str(out)]) == 0
    table, parts = json.loads(out.read_text())
    assert (table["finish"], parts["finish"]) == ("table", "parts")
    assert table["results"] == parts["results"] > 0
    assert table["cleanup_results"] == parts["cleanup_results"] > 0
    assert 0 < parts["held_peak_mb"] == table["held_peak_mb"]


def test_a_bad_budget_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "join-memory", "--quick", "--budgets", "none,lots"]) == 2
    assert "lots" in capsys.readouterr().err
