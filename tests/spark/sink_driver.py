"""Driver program of the sink's SIGKILL tests: file streams -> ``ordered-agg`` sink.

Usage: ``python -m tests.spark.sink_driver <job.json>`` where the JSON holds ``dirs`` (one
Parquet directory per input), ``options`` (the sink options), ``files_per_trigger`` and
``partitioned`` (feed the sink through
:func:`~spark_stream_sched.spark.sink.partition_for_sink`). The query runs with
``Trigger.AvailableNow``, then :func:`finish_sink` flushes the last windows; ``DONE`` is
printed at the end. Crash points (``spark_stream_sched.testing.faults``) are armed through the
environment by the test.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_stream_sched.jobs.runner import file_streams
    from spark_stream_sched.spark import register, sink

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    dirs = [Path(d) for d in job["dirs"]]
    schema = pq.read_schema(next(p for p in sorted(dirs[0].iterdir()) if p.suffix == ".parquet"))
    frame = file_streams(spark, dirs, "parquet", schema, job["files_per_trigger"],
                         with_position=True)
    frame = frame.drop("dc").withColumnRenamed("input_id", "dc")
    if job.get("partitioned"):  # each partition group's rows to one write task
        frame = sink.partition_for_sink(frame, job["options"])
    query = (frame.writeStream.format("ordered-agg").options(**job["options"])
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print("STOPPED", flush=True)
    sink.finish_sink(job["options"])
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
