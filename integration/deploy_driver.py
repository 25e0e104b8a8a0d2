"""Driver of the deployment tests: every door of the plugin, submitted the way Spark ships Python.

``spark-submit ... integration/deploy_driver.py ROOT DOOR [DOOR ...]`` runs each door over the
Parquet inputs ``ROOT/data/in<j>`` (and the end-of-input files ``ROOT/ends/in<j>``, for the
doors fed by Spark's file streams) and writes its windows under ``ROOT/<door>/windows``:

* ``batch``: ``spark.read.format("ordered-agg")``;
* ``source``: the stream, ``Trigger.AvailableNow``, ``endOfInput=availableNow``;
* ``sink``: Spark's file streams into ``writeStream.format("ordered-agg")``;
* ``ordered``: ``ordered(...)`` in ``applyInPandasWithState``.

It prints ``DOOR <door> ok`` or ``DOOR <door> failed: <the error's first line>`` for each and
goes on. It imports only the package and pyspark: whatever the package needs must reach the
driver and the executors by the route under test (an installed, packed environment shipped with
``--archives``, or a zip shipped with ``--py-files``); :func:`register` is called because
pyspark's lookup of installed data sources does not read shipped zips.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import Any

N_INPUTS = 3
WINDOW, SLIDE = "10 seconds", "5 seconds"
AGGREGATES = ["count(*) as n", "avg(value) as mean", "first(value) as first_v",
              "last(kind) as last_kind", "max(ts) as last_ts"]


def inputs(root: str) -> str:
    return ",".join(os.path.join(root, "data", f"in{j}") for j in range(N_INPUTS))


def query_options() -> dict[str, str]:
    return {"timestampColumn": "ts", "keyColumns": "meter", "window": WINDOW, "slide": SLIDE,
            "aggregates": ", ".join(AGGREGATES)}


def file_streams(spark: Any, root: str) -> list[Any]:
    schema = spark.read.parquet(os.path.join(root, "data", "in0")).schema
    return [spark.readStream.schema(schema).option("maxFilesPerTrigger", 2)
            .parquet(os.path.join(root, "{data,ends}", f"in{j}")) for j in range(N_INPUTS)]


def run_to_end(query: Any) -> None:
    """Wait for a streaming query; raise what it failed with."""
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()


def batch(spark: Any, root: str, out: str) -> None:
    df = spark.read.format("ordered-agg").options(inputs=inputs(root), **query_options()).load()
    df.write.parquet(os.path.join(out, "windows"))


def source(spark: Any, root: str, out: str) -> None:
    df = (spark.readStream.format("ordered-agg")
          .options(inputs=inputs(root), stateLocation=os.path.join(out, "state"),
                   endOfInput="availableNow", maxRecordsPerTrigger="200", **query_options())
          .load())
    query = (df.writeStream.format("parquet").trigger(availableNow=True)
             .options(path=os.path.join(out, "windows"),
                      checkpointLocation=os.path.join(out, "checkpoint")).start())
    run_to_end(query)


def sink(spark: Any, root: str, out: str) -> None:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F  # noqa: N812

    from spark_stream_sched.spark.sink import partition_for_sink

    tagged = [df.withColumn("input", F.lit(j)) for j, df in enumerate(file_streams(spark, root))]
    rows = functools.reduce(DataFrame.unionByName, tagged)
    options = {"path": os.path.join(out, "windows"), "inputs": str(N_INPUTS),
               "checkpointLocation": os.path.join(out, "checkpoint"), "inputColumn": "input",
               "sequenceColumn": "pos", "endOfInputColumn": "eof", **query_options()}
    query = (partition_for_sink(rows, options).writeStream.format("ordered-agg")
             .options(**options).trigger(availableNow=True).start())
    run_to_end(query)


def ordered_door(spark: Any, root: str, out: str) -> None:
    from spark_stream_sched.spark.transform import configure, ordered

    configure(spark)
    windows = (ordered(file_streams(spark, root), sequence="pos", keys=["meter"],
                       end_of_input="eof").window(WINDOW, SLIDE).agg(*AGGREGATES))
    query = (windows.writeStream.format("parquet").trigger(availableNow=True)
             .options(path=os.path.join(out, "windows"),
                      checkpointLocation=os.path.join(out, "checkpoint")).start())
    run_to_end(query)


DOORS = {"batch": batch, "source": source, "sink": sink, "ordered": ordered_door}


def first_line(exc: BaseException) -> str:
    """The line that names the cause: the innermost Python or Java error of Spark's text."""
    text = "".join(traceback.format_exception_only(type(exc), exc))
    causes = [line.strip(": ").strip() for line in text.splitlines()
              if ("Error: " in line or "Exception: " in line) and "Py4JJavaError" not in line]
    return causes[-1] if causes else text.strip().splitlines()[0]


def main(root: str, doors: list[str]) -> None:
    from pyspark.sql import SparkSession

    from spark_stream_sched.spark import register

    spark = SparkSession.builder.appName("sss-deploy").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    for door in doors:
        try:
            DOORS[door](spark, root, os.path.join(root, door))
            print(f"DOOR {door} ok", flush=True)
        except Exception as exc:  # reported; the next door runs
            print(f"DOOR {door} failed: {first_line(exc)}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
