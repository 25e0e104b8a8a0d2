"""``spark-stream-sched run`` prints what the query's join did (runtime engine, no Spark).

With ``budget=0`` the join pushes every memory part to disk after each update; the runtime
engine releases every row in one update (the inputs are read whole), so every result is found
by probing before the push and the clean-up stage at the end has nothing to add: the summary
shows pushes and bytes, and zero clean-up results. (Clean-up results per batch:
tests/runtime/engine/test_batch_join.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_stream_sched.cli import main
from spark_stream_sched.jobs.results import format_join

LINE = re.compile(r"^join +([\d,]+) clean-up results in \d+\.\d\d s; ([\d,]+) B pushed to disk "
                  r"in ([\d,]+) pushes$", re.M)


def _config(tmp_path: Path, operators: str, window: str = "") -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[job]
name = "join_cli"
engine = "runtime"
output = "{tmp_path / 'out'}"
checkpoint = "{tmp_path / 'ckpt'}"
show = 0

[data]
generate = true
generator = "smart_grid"
dir = "{tmp_path / 'in'}"
inputs = 2
meters = 4
rows = 300
files_per_input = 2
seed = 7

[query]
key_columns = ["meter"]
operators = [{operators}]
window = "{window}"
aggregates = [{'"count(*) as n"' if window else ""}]
""")
    return path


def test_run_summary_has_the_join_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    assert main(["run", str(_config(tmp_path, '"join(2, within=2 seconds, budget=0)"')),
                 "--quiet"]) == 0
    found = LINE.findall(capsys.readouterr().out)
    assert len(found) == 1
    results, pushed, pushes = (int(x.replace(",", "")) for x in found[0])
    assert results == 0
    assert pushed > 0
    assert pushes > 0


def test_run_summary_without_a_join_has_no_join_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(_config(tmp_path, '"delta(value) as change"', "10s")),
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "rows out" in out
    assert not re.search(r"^join ", out, re.M)


def test_join_line_names_held_results_when_they_were_pushed() -> None:
    line = format_join({"join_cleanup_results": 1234, "join_cleanup_seconds": 0.5,
                        "join_pushed_bytes": 1000, "join_held_pushed_bytes": 24,
                        "join_pushes": 3})
    assert line == ("join          1,234 clean-up results in 0.50 s; 1,024 B pushed to disk "
                    "in 3 pushes (24 B of held results)")
