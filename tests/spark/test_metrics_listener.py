"""OrderedAggProgress delivers the source's per-batch figures next to Spark's progress."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from spark_stream_sched.spark.metrics import OrderedAggProgress

from .helpers import source_options, write_inputs

pytestmark = pytest.mark.spark


def test_listener_reports_every_batch_of_a_query(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=250)
    state = str(tmp_path / "state")
    opts = source_options(str(tmp_path / "in"), 3, state, maxRecordsPerTrigger=200)
    seen: list[dict[str, Any]] = []
    with OrderedAggProgress(spark, state, callback=seen.append) as progress:
        query = (spark.readStream.format("ordered-agg").options(**opts).load()
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    spark_batches = [p for p in query.recentProgress if p.numInputRows or p.sources[0].endOffset]
    assert progress.latest is not None
    assert seen[-1] is progress.latest
    assert progress.latest["batch_id"] == query.lastProgress.batchId
    by_id = {f["batch_id"]: f for f in seen}
    assert len(by_id) >= 2
    for p in spark_batches:
        if p.batchId in by_id:  # the source's windows are Spark's input rows
            assert by_id[p.batchId]["spark_input_rows"] == p.numInputRows
            assert by_id[p.batchId]["windows_out"] == p.numInputRows
    assert sum(f["rows_read"] for f in by_id.values()) == sum(t.num_rows for t in tables)
    assert all(f["lag_ms"] is not None and f["lag_ms"] >= 0 for f in by_id.values())


def test_progress_of_other_queries_is_ignored(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=50)
    seen: list[dict[str, Any]] = []
    with OrderedAggProgress(spark, str(tmp_path / "elsewhere"), callback=seen.append):
        opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"))
        (spark.readStream.format("ordered-agg").options(**opts).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start().awaitTermination())
    assert seen == []


_SCRIPT = """
import sys
from spark_stream_sched.spark import session
from spark_stream_sched.spark.metrics import OrderedAggProgress
spark = session("local[1]", **{"spark.ui.enabled": "false"})
opts = dict(a.split("=", 1) for a in sys.argv[1:])
progress = OrderedAggProgress(spark, opts["stateLocation"])  # never removed: atexit does it
(spark.readStream.format("ordered-agg").options(**opts).load().writeStream.format("noop")
 .option("checkpointLocation", opts["stateLocation"] + "-ckpt").trigger(availableNow=True)
 .start().awaitTermination())
print("batch", progress.latest and progress.latest["batch_id"])
"""


@pytest.mark.slow
def test_no_py4j_traceback_at_interpreter_exit(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=100)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=100)
    done = subprocess.run([sys.executable, "-c", _SCRIPT, *(f"{k}={v}" for k, v in opts.items())],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Py4J" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
