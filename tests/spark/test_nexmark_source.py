"""Nexmark q7 and q11 through the Spark source's batch read equal the pandas references.

The same references as the command-line runtime's (``tests/test_nexmark_queries.py``), on the
same generated bids: the Spark door adds nothing and loses nothing, ties included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_stream_sched.data.nexmark import NexmarkConfig, write_nexmark
from tests.test_nexmark_queries import q7_reference, q11_reference

pytestmark = pytest.mark.spark


def _read(spark: Any, bids: Path, **options: str) -> pd.DataFrame:
    reader = (spark.read.format("ordered-agg").option("inputs", str(bids))
              .option("format", "parquet").option("timestampColumn", "date_time"))
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load()
    # Bounds as epoch milliseconds in Spark, whatever the session's time zone.
    return rows.selectExpr(*(f"unix_millis({c}) as {c}" if c.startswith(("window_", "session_"))
                             else c for c in rows.columns)).toPandas()


def test_q7_and_q11_through_the_source_equal_the_references(spark: Any, tmp_path: Path) -> None:
    config = NexmarkConfig(seed=5, inter_event_us=2_000, avg_bid_bytes=0)  # 500 events/s
    write_nexmark(tmp_path / "nx", 30_000, config, rows_per_file=4_001)
    bids = tmp_path / "nx" / "bid"
    q7 = _read(spark, bids, window="10 seconds",
               aggregates="max(price) as price, max_by(auction, price) as auction, "
                          "max_by(bidder, price) as bidder, max_by(event_id, price) as event_id")
    want7 = q7_reference(bids)
    assert len(want7) == 6
    pd.testing.assert_frame_equal(q7.reset_index(drop=True), want7.reset_index(drop=True),
                                  check_dtype=False)
    q11 = _read(spark, bids, keyColumns="bidder", operators="sessionize(10 seconds)",
                aggregates="count(*) as bids")
    want11 = q11_reference(bids)
    assert len(want11) > 100

    def by_rows(frame: pd.DataFrame) -> pd.DataFrame:
        columns = ["session_start", "session_end", "bidder", "bids"]
        return frame[columns].sort_values(columns).reset_index(drop=True)
    pd.testing.assert_frame_equal(by_rows(q11), by_rows(want11), check_dtype=False)
