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
from typing import Any

import pyarrow.parquet as pq


def driver_session() -> Any:
    """A ``local[2]`` SparkSession for a driver program, the package registered, logs quiet."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_stream_sched.spark import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def start_sink(spark: Any, dirs: list[Path], options: dict[str, str], files_per_trigger: int,
               partitioned: bool) -> Any:
    """Start the file streams of ``dirs`` (input id = position) into the ``ordered-agg`` sink."""
    from spark_stream_sched.jobs.runner import file_streams
    from spark_stream_sched.spark import sink

    schema = pq.read_schema(next(p for p in sorted(dirs[0].iterdir()) if p.suffix == ".parquet"))
    frame = file_streams(spark, dirs, "parquet", schema, files_per_trigger, with_position=True)
    frame = frame.drop("dc").withColumnRenamed("input_id", "dc")
    if partitioned:  # each partition group's rows to one write task
        frame = sink.partition_for_sink(frame, options)
    return (frame.writeStream.format("ordered-agg").options(**options)
            .trigger(availableNow=True).start())


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    from spark_stream_sched.spark import sink

    spark = driver_session()
    query = start_sink(spark, [Path(d) for d in job["dirs"]], job["options"],
                       job["files_per_trigger"], bool(job.get("partitioned")))
    query.awaitTermination()
    print("STOPPED", flush=True)
    sink.finish_sink(job["options"])
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
