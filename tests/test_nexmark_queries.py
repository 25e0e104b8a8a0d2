"""Nexmark q7 and q11 on the CLI runtime, as docs/nexmark.md writes them, against pandas.

The references are written from the queries' definitions. q7: per tumbling 10-second window of
bid event time, the bid with the highest price, of several such bids the one with the smallest
``event_id`` (the total order of one input). q11: per bidder, sessions of bids closed by a
10-second gap (a bid joins the session when it comes less than 10 s after the session's last
bid; the session ends 10 s after its last bid, Spark's ``session_window``), and their bid
counts. The runtime must give them for any file layout.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
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
#: docs/nexmark.md's q11 command after ``--input <dir>/bid``.
Q11 = ["--timestamp", "date_time", "--key", "bidder", "--op", "sessionize(10 seconds)",
       "--agg", "count(*) as bids"]


def _bids(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """The bids under ``path`` without ``date_time``, and their event times in epoch ms."""
    table = pq.read_table(path)
    ms = table.column("date_time").cast(pa.int64()).to_numpy()
    return table.drop_columns(["date_time"]).to_pandas(), ms


def q7_reference(path: Path) -> pd.DataFrame:
    """Each 10 s window's highest bid, the earliest (smallest ``event_id``) of equal prices."""
    bids, ms = _bids(path)
    start = ms - ms % 10_000
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


def q11_reference(path: Path, gap_ms: int = 10_000) -> pd.DataFrame:
    """Each bidder's sessions: a bid less than ``gap_ms`` after the previous one continues it."""
    bids, ms = _bids(path)
    frame = pd.DataFrame({"bidder": bids["bidder"], "ts": ms}).sort_values(
        ["bidder", "ts"], kind="stable")
    new = (frame["bidder"] != frame["bidder"].shift()) | (frame["ts"].diff() >= gap_ms)
    sessions = frame.assign(session=new.cumsum()).groupby("session").agg(
        session_start=("ts", "min"), last=("ts", "max"), bidder=("bidder", "first"),
        bids=("ts", "size"))
    sessions["session_end"] = sessions["last"] + gap_ms
    return sessions[["session_start", "session_end", "bidder", "bids"]]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_q11_counts_each_bidders_sessions_and_the_layout_changes_nothing(tmp_path: Path) -> None:
    config = NexmarkConfig(seed=5, inter_event_us=20_000, avg_bid_bytes=0)  # 50 bids/s: gaps
    outputs = []
    for rows_per_file in (100_000, 613):
        data = tmp_path / f"nx{rows_per_file}"
        write_nexmark(data, 20_000, config, rows_per_file=rows_per_file)
        out = tmp_path / f"q11-{rows_per_file}.csv"
        assert main(["aggregate", "--input", str(data / "bid"), *Q11, "--out", str(out)]) == 0
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]  # byte for byte, rows in the same order
    got = pd.read_csv(tmp_path / "q11-613.csv")
    want = q11_reference(tmp_path / "nx613" / "bid")
    assert len(want) > 100  # many sessions, of one bid and of several
    assert (want["bids"] > 1).any()
    assert (want["bids"] == 1).any()
    pd.testing.assert_frame_equal(_sorted(got), _sorted(want), check_dtype=False)
