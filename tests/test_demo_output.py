"""``demo --output DIR`` replaces only what a demo wrote: DIR carries the demo's marker.

The demo removed ``DIR/output`` and ``DIR/checkpoint`` whatever they held; now a non-empty DIR
without the marker is refused with one line, and nothing in it is touched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_stream_sched.cli import main

RUNTIME_DEMO = ["demo", "--engine", "runtime", "--rows", "2000", "--show", "1", "--quiet"]


def test_a_directory_the_demo_did_not_write_is_refused_and_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "mine"
    (root / "output").mkdir(parents=True)
    (root / "output" / "results.parquet").write_bytes(b"a user's results")
    (root / "checkpoint").mkdir()
    assert main([*RUNTIME_DEMO, "--output", str(root)]) == 2
    err = capsys.readouterr().err
    assert err == (f"spark-stream-sched demo: error: demo --output {root}: the directory is not "
                   f"empty and was not written by the demo (no _demo.json), so nothing in it is "
                   f"replaced; give a new or empty directory, or remove this one yourself\n")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "checkpoint", "output", "output/results.parquet"]


def test_a_regular_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main([*RUNTIME_DEMO, "--output", str(target)]) == 2
    assert capsys.readouterr().err.startswith(
        f"spark-stream-sched demo: error: demo --output {target}: not a directory")
    assert target.read_text() == "x"


def test_the_demo_runs_again_in_its_own_directory(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "demo"
    root.mkdir()  # empty: the demo's from now on
    assert main([*RUNTIME_DEMO, "--output", str(root)]) == 0
    assert (root / "_demo.json").is_file()
    first = [line for line in capsys.readouterr().out.splitlines() if "rows/s" not in line]
    stale = root / "output" / "stale.txt"
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("from an earlier run")
    assert main([*RUNTIME_DEMO, "--output", str(root)]) == 0
    assert not stale.exists()
    assert [line for line in capsys.readouterr().out.splitlines()
            if "rows/s" not in line] == first
