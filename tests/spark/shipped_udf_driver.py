"""``spark-submit --py-files <module> shipped_udf_driver.py <work> <module:function>``.

Runs the source with ``operators = udf(<module:function>)`` over the two inputs under ``<work>``
(``Trigger.AvailableNow``) and prints the result rows as one JSON line after ``RESULT``. The
module is importable only through what ``spark-submit`` shipped.
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from spark_stream_sched.spark import register


def main(work: str, udf: str) -> None:
    """Run the query; print its rows in ``ts`` then ``k`` order."""
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    frame = (spark.readStream.format("ordered-agg")
             .option("inputs", ",".join(os.path.join(work, f"in{i}") for i in range(2)))
             .option("keyColumns", "k").option("operators", f"udf({udf})")
             .option("stateLocation", os.path.join(work, "state"))
             .option("endOfInput", "availableNow").load())
    query = (frame.writeStream.format("parquet").option("path", os.path.join(work, "out"))
             .option("checkpointLocation", os.path.join(work, "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.read.parquet(os.path.join(work, "out")).orderBy("ts", "k").collect()
    print("RESULT " + json.dumps([[r["ts"], r["k"], r["total"]] for r in rows]), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
