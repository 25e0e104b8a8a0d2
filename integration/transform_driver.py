"""Driver of the ``ordered(...)`` cluster test: N Parquet file streams on a standalone cluster.

``python integration/transform_driver.py MASTER ROOT N_INPUTS`` reads the inputs
``ROOT/in<j>`` (one Parquet file stream each, ``maxFilesPerTrigger=1``, columns ``ts``,
``meter``, ``value``, ``kind``, position ``pos`` and end-of-input flag ``eof``), runs
``ordered(...).window(WINDOW, SLIDE).agg(*AGGREGATES)`` in ``applyInPandasWithState`` with
the state in RocksDB (:func:`~spark_stream_sched.spark.transform.configure`), checkpoint in
``ROOT/checkpoint``, and writes each micro-batch to ``ROOT/output/batch-<id>.parquet``
(replaced atomically, so a re-run batch overwrites rather than duplicates). It writes the
application id to ``ROOT/application-id``, prints ``BATCH <id>`` per batch and, once the query
has ended, writes what Spark's ``state-metadata`` source reports to
``ROOT/state-metadata.json`` and prints ``DONE``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

WINDOW, SLIDE = "10 seconds", "5 seconds"
AGGREGATES = ("count(*) as n", "count(value) as nv", "avg(value) as mean", "min(value) as lo",
              "max(value) as hi", "first(value) as first_v", "last(value) as last_v",
              "first_where(value, kind = 'alarm' and value > 5) as first_alarm",
              "count_where(kind = 'alarm') as alarms")
SHUFFLE_PARTITIONS = 4


def main(master: str, root: str, n_inputs: int) -> None:
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession

    from spark_stream_sched.runtime.state.atomic import atomic_writer
    from spark_stream_sched.spark.transform import configure, ordered

    spark = (SparkSession.builder.master(master).appName("sss-transform-cluster")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with open(os.path.join(root, "application-id"), "w") as f:
        f.write(spark.sparkContext.applicationId)
    configure(spark)
    out = os.path.join(root, "output")
    checkpoint = os.path.join(root, "checkpoint")
    os.makedirs(out, exist_ok=True)

    schema = spark.read.parquet(os.path.join(root, "in0")).schema
    inputs = [spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
              .parquet(os.path.join(root, f"in{j}")) for j in range(n_inputs)]
    windows = (ordered(inputs, sequence="pos", timestamp="ts", keys=["meter"],
                       end_of_input="eof").window(WINDOW, SLIDE).agg(*AGGREGATES))

    def write_batch(df: Any, batch_id: int) -> None:
        table = df.toArrow().sort_by([("window_end", "ascending"),
                                      ("window_start", "ascending"), ("meter", "ascending")])
        with atomic_writer(os.path.join(out, f"batch-{batch_id:05d}.parquet")) as tmp:
            pq.write_table(table, tmp)
        print(f"BATCH {batch_id} rows={table.num_rows}", flush=True)

    query = (windows.writeStream.foreachBatch(write_batch)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    metadata = [row.asDict(recursive=True) for row in
                spark.read.format("state-metadata").load(checkpoint).collect()]
    with open(os.path.join(root, "state-metadata.json"), "w") as f:
        json.dump(metadata, f, default=str)
    print("DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
