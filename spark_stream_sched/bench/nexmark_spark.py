"""``bench nexmark``'s Spark engines: the ``ordered-agg`` source and native Spark's queries.

Both read the bid files of one layout and write Spark's Parquet sink under ``out/output``
with ``Trigger.AvailableNow`` (:mod:`.nexmark` runs and checks them):

* :func:`run_source`: ``readStream.format("ordered-agg")`` with the query as source options,
  ``maxRecordsPerTrigger`` rows per micro-batch;
* :func:`run_native`: the query a careful Spark user writes, one file per micro-batch,
  ``withWatermark(date_time, 0 s)`` (the files are sorted by event time), append mode. q7 is
  ``max_by`` over a struct of the bid's columns, ordered by ``struct(price, -event_id)``: the
  highest price, of equal prices the earliest bid, so every column comes from one bid and ties
  cannot depend on the order Spark saw the rows in. q11 is ``session_window`` with a 10 s gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from spark_stream_sched.bench.spark_native import _run_query, _to_parquet


def run_source(spark: Any, options: dict[str, str], bids: Path, out: Path,
               max_records: int) -> None:
    """The query ``options`` over ``bids`` through the ``ordered-agg`` source."""
    from spark_stream_sched.spark import register

    register(spark)
    frame = (spark.readStream.format("ordered-agg")
             .options(inputs=str(bids), format="parquet", timestampColumn="date_time",
                      endOfInput="availableNow", stateLocation=str(out / "state"),
                      maxRecordsPerTrigger=str(max_records), **options)
             .load())
    _run_query(_to_parquet(frame, out))


def run_native(spark: Any, name: str, bids: Path, out: Path) -> None:
    """Native Spark's ``name`` (q7 or q11) over ``bids``, one file per micro-batch."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(pq.read_schema(next(iter(sorted(bids.glob("*.parquet"))))))
    frame = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(str(bids)).withWatermark("date_time", "0 seconds"))
    if name == "q7":
        best = F.max_by(F.struct("price", "auction", "bidder", "event_id"),
                        F.struct("price", (-F.col("event_id")).alias("earliest")))
        result = (frame.groupBy(F.window("date_time", "10 seconds"))
                  .agg(best.alias("best"))
                  .select(F.unix_millis(F.col("window.start")).alias("window_start"),
                          F.unix_millis(F.col("window.end")).alias("window_end"),
                          "best.price", "best.auction", "best.bidder", "best.event_id"))
    elif name == "q11":
        session = F.session_window("date_time", "10 seconds")
        result = (frame.groupBy(session.alias("session"), "bidder")
                  .agg(F.count("*").alias("bids"))
                  .select(F.unix_millis(F.col("session.start")).alias("session_start"),
                          F.unix_millis(F.col("session.end")).alias("session_end"),
                          "bidder", "bids"))
    else:
        raise ValueError(f"bench nexmark: native Spark has no query {name!r}")
    _run_query(_to_parquet(result, out).outputMode("append"))
