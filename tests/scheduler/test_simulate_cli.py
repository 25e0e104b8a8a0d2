"""``spark-stream-sched simulate``: table and JSON output, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from spark_stream_sched.cli import main

from .test_table2 import CONF

PLAN = str(CONF / "example_2_2_plan.json")
ARRIVALS = str(CONF / "example_2_2_arrivals.json")


def test_table_output(capsys):
    code = main(["simulate", "--plan", PLAN, "--arrivals", ARRIVALS, "--strategy", "fifo",
                 "--steps", "10", "--exact"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[1].split() == ["time", "arrivals", "queue", "memory", "output", "latency", "units"]
    row3 = out[4].split()
    assert row3[:6] == ["3", "2", "3", "3", "0.16", "2"]
    assert len(out) == 12


def test_json_lines(capsys):
    code = main(["simulate", "--plan", PLAN, "--arrivals", ARRIVALS, "--strategy", "chain",
                 "--steps", "10", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [r["queue_size"] for r in rows] == pytest.approx(
        [1.0, 1.2, 2.4, 1.6, 0.8, 0.6, 0.4, 0.2, 0, 1.0])
    assert rows[5]["latency"] == pytest.approx(5)
    assert rows[0]["latency"] is None


def test_strategy_params(capsys):
    code = main(["simulate", "--plan", PLAN, "--arrivals", ARRIVALS, "--strategy", "threshold",
                 "--param", "memory_limit=2", "--param", "alpha=none", "--steps", "4", "--json"])
    assert code == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "chian"], "did you mean 'chain'"),
        (["--strategy", "chain", "--param", "gamma"], "KEY=VALUE"),
        (["--strategy", "threshold"], "memory_limit"),
        (["--strategy", "chain", "--steps", "-1"], "--steps must be >= 0"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, args, message):
    base = ["simulate", "--plan", PLAN, "--arrivals", ARRIVALS, "--steps", "3"]
    code = main([*base, *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert message in err[0]


def test_bad_files(tmp_path, capsys):
    arrivals = tmp_path / "arrivals.json"
    arrivals.write_text(json.dumps({"s9": {"1": 1}}))
    assert main(["simulate", "--plan", PLAN, "--arrivals", str(arrivals), "--strategy", "fifo",
                 "--steps", "1"]) == 2
    assert "stream 's9', which no operator reads; valid: s1, s2" in capsys.readouterr().err
    arrivals.write_text(json.dumps({"s1": {"x": 1}}))
    assert main(["simulate", "--plan", PLAN, "--arrivals", str(arrivals), "--strategy", "fifo",
                 "--steps", "1"]) == 2
    assert "not an integer" in capsys.readouterr().err
    arrivals.write_text(json.dumps({"s1": {"1": -1}}))
    assert main(["simulate", "--plan", PLAN, "--arrivals", str(arrivals), "--strategy", "fifo",
                 "--steps", "1"]) == 2
    assert "must be a number >= 0" in capsys.readouterr().err


def test_missing_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "--plan", PLAN])
    assert exc.value.code == 2
