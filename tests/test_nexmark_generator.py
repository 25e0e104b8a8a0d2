"""The Nexmark generator: the model's proportions, ids and references, and determinism.

Every field of event ``n`` is a function of the seed and ``n`` alone, so any split of the event
range gives the same rows, and a longer run begins with a shorter one. The model's rules are
checked against their definitions (written here from the Nexmark description, not from the
generator's code).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.cli import main
from spark_stream_sched.data.nexmark import (
    BASE_TIME_MS,
    KINDS,
    SCHEMAS,
    NexmarkConfig,
    expected_counts,
    nexmark_events,
    write_nexmark,
)
from spark_stream_sched.errors import ConfigError


def _concat(parts: list[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    return {k: pa.concat_tables([p[k] for p in parts]) for k in KINDS}


@settings(max_examples=25, deadline=None)
@given(events=st.integers(0, 3_000), cuts=st.lists(st.integers(0, 3_000), max_size=4),
       seed=st.integers(0, 2**63 - 1))
def test_any_split_of_the_events_gives_the_same_rows(events: int, cuts: list[int],
                                                     seed: int) -> None:
    config = NexmarkConfig(seed=seed)
    bounds = sorted({0, events, *(c for c in cuts if c < events)})
    whole = nexmark_events(0, events, config)
    pieces = _concat([nexmark_events(a, b, config) for a, b in zip(bounds, bounds[1:],
                                                                    strict=False)]
                     or [nexmark_events(0, 0, config)])
    for kind in KINDS:
        assert pieces[kind].equals(whole[kind]), kind
        assert whole[kind].schema == SCHEMAS[kind]


def test_the_proportions_are_one_three_forty_six() -> None:
    events = nexmark_events(0, 5_000)
    counts = {k: t.num_rows for k, t in events.items()}
    assert counts == expected_counts(5_000) == {"person": 100, "auction": 300, "bid": 4_600}
    assert expected_counts(53) == {"person": 2, "auction": 5, "bid": 46}


def test_ids_count_up_and_references_point_at_people_and_auctions_that_exist_or_are_near() -> None:
    events = nexmark_events(0, 20_000)
    person, auction, bid = (events[k].to_pydict() for k in KINDS)
    assert person["id"] == list(range(1000, 1000 + len(person["id"])))
    assert auction["id"] == list(range(1000, 1000 + len(auction["id"])))
    people_by_event = np.array(person["event_id"])
    auctions_by_event = np.array(auction["event_id"])
    for e, seller in zip(auction["event_id"], auction["seller"], strict=True):
        created = int(np.searchsorted(people_by_event, e, side="right"))  # people so far
        assert 1000 <= seller < 1000 + created + 10  # at most the lead of 10 ahead
    hot = 0
    for e, a, b in zip(bid["event_id"], bid["auction"], bid["bidder"], strict=True):
        auctions = int(np.searchsorted(auctions_by_event, e, side="right"))
        people = int(np.searchsorted(people_by_event, e, side="right"))
        assert max(1000, 1000 + auctions - 1 - 100) <= a < 1000 + auctions + 10
        assert 1000 <= b < 1000 + people + 10
        hot += (a - 1000) % 100 == 0
    # hot auctions (the first of each batch of 100) take about half the bids (ratio 2)
    assert 0.4 < hot / len(bid["auction"]) < 0.7


def test_event_time_is_the_event_number_times_the_delay() -> None:
    config = NexmarkConfig(inter_event_us=250)
    events = nexmark_events(0, 1_000, config)
    for kind in KINDS:
        table = events[kind]
        n = np.array(table.column("event_id").to_pylist())
        ts = table.column("date_time").cast(pa.int64()).to_numpy()
        assert (ts == BASE_TIME_MS + n * 250 // 1000).all()
        assert (np.diff(ts) >= 0).all()
    auction = events["auction"]
    assert pa.compute.all(pa.compute.greater(auction.column("expires"),
                                             auction.column("date_time"))).as_py()
    assert pa.compute.all(pa.compute.greater_equal(auction.column("reserve"),
                                                   auction.column("initial_bid"))).as_py()


def test_the_fields_have_the_models_shapes_and_sizes() -> None:
    events = nexmark_events(0, 50_000)
    person, auction, bid = (events[k] for k in KINDS)
    cards = person.column("credit_card").to_pylist()
    assert all(len(c) == 19 for c in cards)
    assert all(c[4] == c[9] == c[14] == " " for c in cards)
    emails = person.column("email_address").to_pylist()
    assert all(e.endswith(".com") for e in emails)
    assert all(len(e.split("@")[0]) == 7 for e in emails)
    assert set(auction.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    prices = np.array(bid.column("price").to_pylist())
    assert prices.min() >= 100
    assert prices.max() <= 100_000_000
    # the padding brings each kind to its average size (Beam's nextExtra: +-20 %)
    extra = np.array(pa.compute.utf8_length(bid.column("extra")).to_pylist())
    assert 60 <= extra.mean() <= 76  # 100 bytes less the 32 of the numbers and time
    assert extra.min() >= 54
    assert extra.max() <= 81


def test_seeds_differ_and_the_same_seed_repeats() -> None:
    a, b = nexmark_events(0, 500, NexmarkConfig(seed=1)), nexmark_events(0, 500,
                                                                          NexmarkConfig(seed=2))
    assert a["bid"].equals(nexmark_events(0, 500, NexmarkConfig(seed=1))["bid"])
    assert not a["bid"].column("price").equals(b["bid"].column("price"))


def test_write_and_the_cli_give_sorted_files_of_the_same_events(tmp_path: Path,
                                                                capsys) -> None:
    rows = write_nexmark(tmp_path / "w", 2_345, NexmarkConfig(seed=3), rows_per_file=700,
                         chunk=600)
    assert rows == expected_counts(2_345)
    expected = nexmark_events(0, 2_345, NexmarkConfig(seed=3))
    assert main(["nexmark", "generate", "--events", "2345", "--seed", "3", "--rows-per-file",
                 "700", "--out", str(tmp_path / "cli")]) == 0
    assert "2,345 events" in capsys.readouterr().out
    for root in ("w", "cli"):
        for kind in KINDS:
            files = sorted((tmp_path / root / kind).glob("*.parquet"))
            assert [pq.read_metadata(f).num_rows for f in files][:-1] == (
                [700] * (len(files) - 1)), (root, kind)
            table = pa.concat_tables([pq.read_table(f) for f in files])
            assert table.equals(expected[kind]), (root, kind)


def test_an_existing_output_or_a_bad_count_is_one_clear_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="exists and is not an empty directory"):
        write_nexmark(tmp_path / "full", 10)
    assert (tmp_path / "full" / "keep.txt").read_text() == "x"
    assert main(["nexmark", "generate", "--events", "-5", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--events -5" in err[0]
    with pytest.raises(ConfigError, match="seed"):
        NexmarkConfig(seed=-1)
