"""Each read() logs one JSON line of metrics; the counts add up over a batch's partitions."""

from __future__ import annotations

import json
import logging

from pyspark.sql.streaming.datasource import ReadAllAvailable

from .helpers import source_options, write_inputs
from .test_reader import make_reader


def test_partition_metrics_add_up(tmp_path, caplog) -> None:
    tables = write_inputs(str(tmp_path / "in"))
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                                        numPartitions=3))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    with caplog.at_level(logging.INFO, logger="spark_stream_sched.spark.source"):
        rows = [r for p in reader.partitions(start, end) for b in reader.read(p)
                for r in b.to_pylist()]
    lines = [m for m in caplog.messages if m.startswith("ordered-agg partition")]
    metrics = [json.loads(m.split(": ", 1)[1]) for m in lines]
    assert len(metrics) == 3
    total = sum(t.num_rows for t in tables)
    assert all(m["rows_read"] == total for m in metrics)
    assert sum(m["rows_of_partition"] for m in metrics) == total
    assert sum(m["windows_out"] for m in metrics) == len(rows) > 0
    assert all(m["late_dropped"] == 0 and m["state_bytes"] > 0 for m in metrics)
