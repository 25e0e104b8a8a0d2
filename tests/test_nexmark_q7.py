"""Nexmark q7 (highest bid) on the CLI runtime, as docs/nexmark.md writes it, against pandas.

The reference is written from the query's definition: per tumbling 10-second window of bid
event time, the bid with the highest price, of several such bids the one with the smallest
``event_id`` (the total order of one input). The runtime must give it for any file layout.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.cli import main
from spark_stream_sched.data.nexmark import NexmarkConfig, write_nexmark

#: docs/nexmark.md's q7 command after ``--input <dir>/bid``.
Q7 = ["--timestamp", "date_time", "--window", "10s", "--agg", "max(price) as price",
      "--agg", "max_by(auction, price) as auction", "--agg", "max_by(bidder, price) as bidder",
      "--agg", "max_by(event_id, price) as event_id"]


def q7_reference(path: Path) -> pd.DataFrame:
    """Each 10 s window's highest bid, the earliest (smallest ``event_id``) of equal prices."""
    table = pq.read_table(path)
    ms = table.column("date_time").cast(pa.int64())  # epoch milliseconds
    bids = table.drop_columns(["date_time"]).to_pandas()
    start = ms.to_numpy() - ms.to_numpy() % 10_000
    best = (bids.assign(window_start=start)
            .sort_values(["window_start", "price", "event_id"], ascending=[True, False, True])
            .groupby("window_start", sort=True).head(1))
    return pd.DataFrame({"window_start": best["window_start"].to_numpy(),
                         "window_end": best["window_start"].to_numpy() + 10_000,
                         "price": best["price"].to_numpy(), "auction": best["auction"].to_numpy(),
                         "bidder": best["bidder"].to_numpy(),
                         "event_id": best["event_id"].to_numpy()})


@pytest.mark.parametrize("rows_per_file", [100_000, 997])
def test_q7_is_the_highest_bid_of_each_window_for_any_file_layout(tmp_path: Path,
                                                                   rows_per_file: int) -> None:
    # 1,000 events per second of event time: 60,000 events make six 10 s windows.
    config = NexmarkConfig(seed=11, inter_event_us=1_000, avg_bid_bytes=0)
    write_nexmark(tmp_path / "nx", 60_000, config, rows_per_file=rows_per_file)
    out = tmp_path / "q7.parquet"
    assert main(["aggregate", "--input", str(tmp_path / "nx" / "bid"), *Q7,
                 "--out", str(out)]) == 0
    got = pq.read_table(out).to_pandas()
    got["window_start"] = got["window_start"].astype("int64")
    got["window_end"] = got["window_end"].astype("int64")
    want = q7_reference(tmp_path / "nx" / "bid")
    assert len(want) == 6
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True),
                                  check_dtype=False)


def test_q7_breaks_a_price_tie_by_the_earliest_bid(tmp_path: Path) -> None:
    """Bids of equal top price in one window: every max_by column comes from the first of them."""
    config = NexmarkConfig(seed=3, inter_event_us=1_000, avg_bid_bytes=0)
    write_nexmark(tmp_path / "nx", 10_000, config)
    bids = pq.read_table(tmp_path / "nx" / "bid")
    prices = bids.column("price").to_numpy().copy()
    top = prices.max()
    prices[[100, 200, 300]] = top  # three more bids at the top price, after any original one
    tied = tmp_path / "tied"
    tied.mkdir()
    pq.write_table(bids.set_column(bids.schema.get_field_index("price"), "price",
                                   pa.array(prices)), tied / "part-0.parquet")
    out = tmp_path / "q7.csv"
    assert main(["aggregate", "--input", str(tied), *Q7, "--out", str(out)]) == 0
    got = pd.read_csv(out)
    want = q7_reference(tied)
    assert len(got) == 1
    assert got.loc[0, "event_id"] == want.loc[0, "event_id"]
    assert (got.loc[0, "auction"], got.loc[0, "bidder"]) == (want.loc[0, "auction"],
                                                            want.loc[0, "bidder"])
