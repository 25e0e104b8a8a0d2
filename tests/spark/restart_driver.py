"""Driver program of the SIGKILL restart test: one ordered-agg query, batches to Parquet.

Usage: ``python -m tests.spark.restart_driver <options.json> <checkpoint> <out-dir>``. Each
micro-batch is written to ``<out>/batch-<id>.parquet`` (temporary file + rename, so a replayed
batch overwrites its own file), then ``BATCH <id>`` is printed and flushed.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow.parquet as pq

from spark_stream_sched.runtime.state.atomic import atomic_writer


def main() -> None:
    options_path, checkpoint, out = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with open(options_path, encoding="utf-8") as fh:
        options = json.load(fh)
    os.makedirs(out, exist_ok=True)

    def write_batch(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        table = df.toArrow()
        if os.environ.get("RESTART_DRIVER_SORT") != "none":  # pipelines: compared as multisets
            table = table.sort_by([("window_end", "ascending"), ("window_start", "ascending"),
                                   ("meter", "ascending")])
        with atomic_writer(os.path.join(out, f"batch-{batch_id:05d}.parquet")) as tmp:
            pq.write_table(table, tmp)
        print(f"BATCH {batch_id}", flush=True)

    query = (spark.readStream.format("ordered-agg").options(**options).load().writeStream
             .foreachBatch(write_batch).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
