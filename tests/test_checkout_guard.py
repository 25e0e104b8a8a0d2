"""The guard that fails a test run which wrote into the checkout (``tests/checkout_guard.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.checkout_guard import is_checkout, snapshot, written_since


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A small git checkout: one tracked file, ``out/`` and ``*.log`` ignored, a cache dir."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("/out/\n*.log\n__pycache__/\n")
    (root / "tracked.py").write_text("x = 1\n")
    (root / "out").mkdir()
    (root / "out" / "old.csv").write_text("a\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", ".gitignore", "tracked.py"], check=True)
    return root


def test_files_written_into_ignored_paths_are_reported(checkout: Path) -> None:
    before = snapshot(checkout)
    assert set(before) == {"out/old.csv"}  # tracked files are not in it
    (checkout / "out" / "new.parquet").write_bytes(b"PAR1")
    (checkout / "run.log").write_text("spark said things\n")
    (checkout / "out" / "old.csv").write_text("a\nb\n")
    assert written_since(checkout, before) == [
        "created out/new.parquet", "changed out/old.csv", "created run.log"]


def test_removed_ignored_files_are_reported(checkout: Path) -> None:
    before = snapshot(checkout)
    (checkout / "out" / "old.csv").unlink()
    assert written_since(checkout, before) == ["removed out/old.csv"]


def test_tracked_untracked_and_cache_files_are_left_to_ci(checkout: Path) -> None:
    """A developer edits and creates source files while the suite runs: not the guard's job."""
    before = snapshot(checkout)
    (checkout / "tracked.py").write_text("x = 2\n")
    (checkout / "new_module.py").write_text("y = 1\n")
    (checkout / "__pycache__").mkdir()
    (checkout / "__pycache__" / "tracked.cpython-311.pyc").write_bytes(b"\0")
    assert written_since(checkout, before) == []


def test_only_the_top_of_a_work_tree_is_a_checkout(checkout: Path, tmp_path: Path) -> None:
    assert is_checkout(checkout)
    assert not is_checkout(checkout / "out")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not is_checkout(plain)
