"""Option ``workers`` without ``scheduler`` runs the groups on the executor under ``fifo``.

It used to be accepted and silently ignored.
"""

from __future__ import annotations

import json
import logging

from pyspark.sql.streaming.datasource import ReadMaxRows

from .helpers import source_options, write_inputs
from .test_reader import make_reader, run_batches


def test_workers_alone_run_on_the_executor_with_identical_results(tmp_path, caplog) -> None:
    write_inputs(str(tmp_path / "in"), rows=240)
    direct = run_batches(make_reader(source_options(
        str(tmp_path / "in"), 3, str(tmp_path / "direct"), partitionGroups=6)),
        limit=ReadMaxRows(150))
    with caplog.at_level(logging.INFO, logger="spark_stream_sched.spark.source"):
        threaded = run_batches(make_reader(source_options(
            str(tmp_path / "in"), 3, str(tmp_path / "threaded"), partitionGroups=6,
            workers=2)), limit=ReadMaxRows(150))
    assert threaded == direct
    assert len(direct) >= 3
    metrics = [json.loads(m.split(": ", 1)[1]) for m in caplog.messages
               if m.startswith("ordered-agg partition")]
    assert metrics
    assert all("executor" in m for m in metrics)
