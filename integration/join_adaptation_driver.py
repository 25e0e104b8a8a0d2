"""Driver of the join-adaptation cluster test: an ``ordered-agg`` join on a standalone cluster.

``python integration/join_adaptation_driver.py MASTER ROOT`` reads the source options from
``ROOT/options.json`` (a 3-way ``join`` with ``adaptation=lazy-disk``), runs the query on the
standalone master (two 1-core executors), checkpoint in ``ROOT/checkpoint``, and writes each
micro-batch to ``ROOT/output/batch-<id>.parquet`` (replaced atomically). It writes the
application id to ``ROOT/application-id``, prints ``BATCH <id>`` per batch and ``DONE`` at the
end.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(master: str, root: str) -> None:
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession

    from spark_stream_sched.runtime.state.atomic import atomic_writer

    spark = (SparkSession.builder.master(master).appName("sss-join-adaptation")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with open(os.path.join(root, "application-id"), "w") as f:
        f.write(spark.sparkContext.applicationId)
    with open(os.path.join(root, "options.json"), encoding="utf-8") as f:
        options = json.load(f)
    out = os.path.join(root, "output")
    os.makedirs(out, exist_ok=True)

    def write_batch(df: Any, batch_id: int) -> None:
        table = df.toArrow()
        with atomic_writer(os.path.join(out, f"batch-{batch_id:05d}.parquet")) as tmp:
            pq.write_table(table, tmp)
        print(f"BATCH {batch_id} rows={table.num_rows}", flush=True)

    query = (spark.readStream.format("ordered-agg").options(**options).load().writeStream
             .foreachBatch(write_batch)
             .option("checkpointLocation", os.path.join(root, "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
