"""``spark-stream-sched report``: a PNG and a table from a real query's metrics; clear errors."""

from __future__ import annotations

import sys

import pytest

from spark_stream_sched.cli import main

from .helpers import source_options, write_inputs

pytestmark = pytest.mark.spark

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_of_a_real_run(spark, tmp_path, capsys) -> None:
    write_inputs(str(tmp_path / "in"), rows=200)
    state = str(tmp_path / "state")
    opts = source_options(str(tmp_path / "in"), 3, state, maxRecordsPerTrigger=150)
    (spark.readStream.format("ordered-agg").options(**opts).load()
     .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
     .trigger(availableNow=True).start().awaitTermination())
    out = tmp_path / "plots" / "report.png"
    assert main(["report", state, "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["batch", "rows", "in", "windows", "out"]
    batch_rows = [line.split() for line in lines[2:] if line.split()[0].isdigit()]
    assert len(batch_rows) >= 4  # 651 rows at 150 per batch, the last batch unmerged included
    assert [int(r[0]) for r in batch_rows] == list(range(len(batch_rows)))


def test_report_without_metrics_is_one_line_exit_2(tmp_path, capsys) -> None:
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "no ordered-agg batches recorded under" in err
    assert not (tmp_path / "r.png").exists()


def test_report_without_matplotlib_names_the_extra(tmp_path, monkeypatch, capsys) -> None:
    from spark_stream_sched.runtime.state import batch_metrics

    batch_metrics.write_part(str(tmp_path), "000000000000001-x", 0,
                             {"batch_id": 0, "rows_read": 1, "seconds": 0.1})
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r.png")]) == 2
    err = capsys.readouterr().err
    assert "matplotlib is not installed" in err
    assert "spark_stream_sched[bench]" in err
