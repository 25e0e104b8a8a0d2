"""Nexmark events: the persons, auctions and bids of an online auction, deterministic.

The model of the Nexmark benchmark as Apache Beam's and Apache Flink's Nexmark generators
implement it (docs/references.md): event ``n`` is a person, an auction or a bid by its place in
a cycle of 50 (1 : 3 : 46); person and auction ids count up with their events; an auction's
seller and a bid's bidder are "hot" people (the first of the last 100) with probability
``1 - 1/hot_*_ratio``, else one of the ``num_active_people`` latest (plus a lead of 10 not yet
created); a bid's auction is likewise hot or one of the ``num_in_flight_auctions`` latest;
prices are ``round(10 ** (6 u) * 100)`` cents; strings pad each event to its average byte size.

What differs from those generators is where the randomness comes from. Theirs draw from one
``java.util.Random`` per event seeded by the event id; here every draw is a counter-based hash
(the SplitMix64 finaliser) of ``(seed, n, draw)``, so every field of event ``n`` is a function
of the seed and ``n`` alone: a longer run, another chunk size or another machine gives the
same first events, bit for bit. Event time is ``base_time_ms + n * inter_event_us // 1000`` (one
generator at a constant rate; no wall clock anywhere). The events are the same model, not the
same values as Beam's.

:func:`nexmark_events` returns the three tables of events ``[start, stop)``;
:func:`write_nexmark` writes them as Parquet files sorted by event time (``person/``,
``auction/``, ``bid/``). Every table carries ``event_id``, the event's number: the total order
of the three inputs together, and a sequence column for ``ordered()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError

#: Events of each kind in one cycle of ``PROPORTION_DENOMINATOR`` events (person, auction, bid).
PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
#: The first ids, so that small runs find matches (the generators' values).
FIRST_PERSON_ID, FIRST_AUCTION_ID, FIRST_CATEGORY_ID = 1000, 1000, 10
NUM_CATEGORIES = 5
#: Ids a draw may pick ahead of the last one created (a bid for an auction not yet seen).
ID_LEAD = 10
#: Hot sellers, bidders and auctions are the first of each batch of this many.
HOT_BATCH = 100
#: 2015-07-15T00:00:00Z, the event time of event 0 (ms since the epoch).
BASE_TIME_MS = 1_436_918_400_000
KINDS = ("person", "auction", "bid")

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")

_TS = pa.timestamp("ms", tz="UTC")
#: The three inputs' schemas (Nexmark's field names in snake case, plus ``event_id``).
SCHEMAS = {
    "person": pa.schema([("id", pa.int64()), ("name", pa.string()),
                         ("email_address", pa.string()), ("credit_card", pa.string()),
                         ("city", pa.string()), ("state", pa.string()), ("date_time", _TS),
                         ("extra", pa.string()), ("event_id", pa.int64())]),
    "auction": pa.schema([("id", pa.int64()), ("item_name", pa.string()),
                          ("description", pa.string()), ("initial_bid", pa.int64()),
                          ("reserve", pa.int64()), ("date_time", _TS), ("expires", _TS),
                          ("seller", pa.int64()), ("category", pa.int64()),
                          ("extra", pa.string()), ("event_id", pa.int64())]),
    "bid": pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                      ("date_time", _TS), ("extra", pa.string()), ("event_id", pa.int64())]),
}

#: Bytes of each pool of characters strings are cut from, and the longest cut.
_POOL, _LONGEST = 1 << 16, 512


@dataclass(frozen=True)
class NexmarkConfig:
    """The generator's parameters (defaults: the Nexmark configuration's).

    ``inter_event_us``: event time between consecutive events (100 us: 10,000 events per second
    of event time, one generator at Beam's default rate); ``num_active_people`` and
    ``num_in_flight_auctions``: how far back a non-hot draw reaches; ``hot_*_ratio``: one draw in
    that many is not hot; ``avg_*_bytes``: the average size each kind is padded to.
    """

    seed: int = 0
    base_time_ms: int = BASE_TIME_MS
    inter_event_us: int = 100
    num_active_people: int = 1000
    num_in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    def __post_init__(self) -> None:
        if not 0 <= self.seed < 2**63:
            raise ConfigError(f"nexmark seed {self.seed} must be in [0, 2**63)")
        for name in ("inter_event_us", "num_active_people", "num_in_flight_auctions",
                     "hot_auction_ratio", "hot_sellers_ratio", "hot_bidders_ratio"):
            if getattr(self, name) < 1:
                raise ConfigError(f"nexmark {name} is {getattr(self, name)}; it must be >= 1")
        for name in ("avg_person_bytes", "avg_auction_bytes", "avg_bid_bytes"):
            if not 0 <= getattr(self, name) <= _LONGEST:
                raise ConfigError(
                    f"nexmark {name} is {getattr(self, name)}; it must be in [0, {_LONGEST}]")


def _mix(x: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser of uint64 ``x`` (wrapping arithmetic, as intended)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: np.ndarray = z ^ (z >> np.uint64(31))
        return out


class _Draws:
    """Uniform draws of events ``n``: draw ``k`` of event ``n`` depends on (seed, n, k) only."""

    def __init__(self, seed: int, n: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            self._key = _mix(np.full(1, seed, np.uint64) ^ np.uint64(0xD1B54A32D192ED03)) ^ _mix(
                n.astype(np.uint64) * np.uint64(64))

    def bits(self, k: int) -> np.ndarray:
        """64 random bits per event, for draw ``k`` (0 <= k < 64)."""
        with np.errstate(over="ignore"):
            return _mix(self._key + np.uint64(k))

    def uniform(self, k: int) -> np.ndarray:
        """A float64 in [0, 1) per event."""
        out: np.ndarray = (self.bits(k) >> np.uint64(11)).astype(np.float64) * 2.0**-53
        return out

    def below(self, k: int, bound: np.ndarray | int) -> np.ndarray:
        """An int64 in [0, bound) per event (``bound >= 1``)."""
        out: np.ndarray = np.minimum(np.floor(self.uniform(k) * bound).astype(np.int64),
                                     np.asarray(bound, np.int64) - 1)
        return out


def _pool(seed: int, spaces: bool) -> np.ndarray:
    """``_POOL`` characters of the seed: letters, and with ``spaces`` one space in 13."""
    bits = _mix(np.arange(_POOL, dtype=np.uint64) ^ _mix(np.full(1, seed, np.uint64)
                                                           + np.uint64(1 + spaces)))
    letters = (ord("a") + (bits % np.uint64(26))).astype(np.uint8)
    if spaces:
        letters[(bits >> np.uint64(32)) % np.uint64(13) == 0] = ord(" ")
    out: np.ndarray = letters
    return out


def _cut(pool: np.ndarray, draws: _Draws, k: int, lengths: np.ndarray) -> pa.Array:
    """A string per event: ``lengths`` characters of ``pool`` from a start drawn by ``k``."""
    lengths = lengths.astype(np.int64)
    starts = draws.below(k, _POOL - _LONGEST)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    data = pool[index]
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(data))


def _text(pool: np.ndarray, draws: _Draws, k: int, longest: int) -> pa.Array:
    """Beam's ``nextString``: 3 to ``longest - 1`` characters, one in 13 a space, trimmed."""
    lengths = 3 + draws.below(k, longest - 3)
    return pc.utf8_trim_whitespace(_cut(pool, draws, k + 1, lengths))


def _extra(pool: np.ndarray, draws: _Draws, k: int, size: np.ndarray, average: int) -> pa.Array:
    """Beam's ``nextExtra``: letters that bring ``size`` bytes to ``average`` on average."""
    want = np.maximum(average - size.astype(np.int64), 0)
    delta = np.floor(want * 0.2 + 0.5).astype(np.int64)
    spread = np.where(delta > 0, draws.below(k, np.maximum(2 * delta, 1)), 0)
    return _cut(pool, draws, k + 1, np.where(size > average, 0, want - delta + spread))


def last_person(n: np.ndarray) -> np.ndarray:
    """The last person id (base 0) created at or before event ``n``."""
    epoch, offset = np.divmod(n, PROPORTION_DENOMINATOR)
    return epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)


def last_auction(n: np.ndarray) -> np.ndarray:
    """The last auction id (base 0) created at or before event ``n`` (-1: none yet)."""
    epoch, offset = np.divmod(n, PROPORTION_DENOMINATOR)
    person = offset < PERSON_PROPORTION
    epoch = np.where(person, epoch - 1, epoch)
    offset = np.where(person, AUCTION_PROPORTION - 1,
                      np.minimum(offset - PERSON_PROPORTION, AUCTION_PROPORTION - 1))
    return epoch * AUCTION_PROPORTION + offset


def _some_person(n: np.ndarray, draws: _Draws, k: int, config: NexmarkConfig) -> np.ndarray:
    """One of the latest ``num_active_people`` people, or up to ``ID_LEAD`` ahead (base 0)."""
    people = last_person(n) + 1
    active = np.minimum(people, config.num_active_people)
    out: np.ndarray = people - active + draws.below(k, active + ID_LEAD)
    return out


def _some_auction(n: np.ndarray, draws: _Draws, k: int, config: NexmarkConfig) -> np.ndarray:
    """One of the latest ``num_in_flight_auctions`` auctions, or up to ``ID_LEAD`` ahead."""
    newest = last_auction(n)
    oldest = np.maximum(newest - config.num_in_flight_auctions, 0)
    out: np.ndarray = oldest + draws.below(k, newest - oldest + 1 + ID_LEAD)
    return out


def _price(draws: _Draws, k: int) -> np.ndarray:
    """Beam's ``nextPrice``: ``round(10 ** (6 u) * 100)``, cents from 1 to 100,000,000."""
    return np.floor(10.0 ** (draws.uniform(k) * 6.0) * 100.0 + 0.5).astype(np.int64)


def _hot(draws: _Draws, k: int, ratio: int) -> np.ndarray:
    """True with probability ``1 - 1/ratio``."""
    return draws.below(k, ratio) > 0


def event_times(n: np.ndarray, config: NexmarkConfig) -> np.ndarray:
    """Event time (ms since the epoch) of events ``n``."""
    return config.base_time_ms + (n * config.inter_event_us) // 1000


def _persons(n: np.ndarray, config: NexmarkConfig, pools: dict[bool, np.ndarray]) -> pa.Table:
    d = _Draws(config.seed, n)
    name = pc.binary_join_element_wise(pa.array(FIRST_NAMES).take(d.below(0, len(FIRST_NAMES))),
                                       pa.array(LAST_NAMES).take(d.below(1, len(LAST_NAMES))),
                                       " ")
    email = pc.binary_join_element_wise(_cut(pools[False], d, 2, np.full(len(n), 7)),
                                        _cut(pools[False], d, 3, np.full(len(n), 5)), "@")
    email = pc.binary_join_element_wise(email, pa.scalar(".com"), "")
    digits = np.stack([d.below(4 + i, 10_000) for i in range(4)], axis=1)
    card = np.full((len(n), 19), ord(" "), np.uint8)
    for group in range(4):
        for place in range(4):
            card[:, group * 5 + place] = ord("0") + digits[:, group] // 10 ** (3 - place) % 10
    credit_card = pa.StringArray.from_buffers(
        len(n), pa.py_buffer(np.arange(0, 19 * len(n) + 1, 19, dtype=np.int32)),
        pa.py_buffer(card.reshape(-1)))
    city = pa.array(US_CITIES).take(d.below(8, len(US_CITIES)))
    state = pa.array(US_STATES).take(d.below(9, len(US_STATES)))
    size = 8 + sum(pc.utf8_length(a).to_numpy(zero_copy_only=False).astype(np.int64)
                   for a in (name, email, credit_card, city, state))
    ts = event_times(n, config)
    return pa.Table.from_arrays(
        [pa.array(last_person(n) + FIRST_PERSON_ID), name, email, credit_card, city, state,
         pa.array(ts, _TS), _extra(pools[False], d, 10, size, config.avg_person_bytes),
         pa.array(n)], schema=SCHEMAS["person"])


def _auctions(n: np.ndarray, config: NexmarkConfig, pools: dict[bool, np.ndarray]) -> pa.Table:
    d = _Draws(config.seed, n)
    hot_seller = (last_person(n) // HOT_BATCH) * HOT_BATCH
    seller = np.where(_hot(d, 0, config.hot_sellers_ratio), hot_seller,
                      _some_person(n, d, 1, config)) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + d.below(2, NUM_CATEGORIES)
    initial_bid = _price(d, 3)
    ts = event_times(n, config)
    # Beam: an auction lasts 1 + [0, 2 h) ms, h the event time until num_in_flight_auctions more
    # auctions have been created (so about that many are in flight)
    ahead = config.num_in_flight_auctions * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon = event_times(n + ahead, config) - ts
    expires = ts + 1 + d.below(4, np.maximum(2 * horizon, 1))
    name = _text(pools[True], d, 5, 20)
    description = _text(pools[True], d, 7, 100)
    reserve = initial_bid + _price(d, 9)
    size = 8 + 40 + (pc.utf8_length(name).to_numpy(zero_copy_only=False).astype(np.int64)
                     + pc.utf8_length(description).to_numpy(zero_copy_only=False))
    return pa.Table.from_arrays(
        [pa.array(last_auction(n) + FIRST_AUCTION_ID), name, description, pa.array(initial_bid),
         pa.array(reserve), pa.array(ts, _TS), pa.array(expires, _TS), pa.array(seller),
         pa.array(category), _extra(pools[False], d, 10, size, config.avg_auction_bytes),
         pa.array(n)], schema=SCHEMAS["auction"])


def _bids(n: np.ndarray, config: NexmarkConfig, pools: dict[bool, np.ndarray]) -> pa.Table:
    d = _Draws(config.seed, n)
    hot_auction = (last_auction(n) // HOT_BATCH) * HOT_BATCH
    auction = np.where(_hot(d, 0, config.hot_auction_ratio), hot_auction,
                       _some_auction(n, d, 1, config)) + FIRST_AUCTION_ID
    # the second of the batch, so that hot bidders are not the hot sellers
    hot_bidder = (last_person(n) // HOT_BATCH) * HOT_BATCH + 1
    bidder = np.where(_hot(d, 2, config.hot_bidders_ratio), hot_bidder,
                      _some_person(n, d, 3, config)) + FIRST_PERSON_ID
    size = np.full(len(n), 32, np.int64)
    return pa.Table.from_arrays(
        [pa.array(auction), pa.array(bidder), pa.array(_price(d, 4)),
         pa.array(event_times(n, config), _TS),
         _extra(pools[False], d, 5, size, config.avg_bid_bytes), pa.array(n)],
        schema=SCHEMAS["bid"])


_BUILD: dict[str, Callable[[np.ndarray, NexmarkConfig, dict[bool, np.ndarray]], pa.Table]] = {
    "person": _persons, "auction": _auctions, "bid": _bids}


def kinds_of(n: np.ndarray) -> np.ndarray:
    """0 (person), 1 (auction) or 2 (bid) for events ``n``."""
    offset = n % PROPORTION_DENOMINATOR
    return np.where(offset < PERSON_PROPORTION, 0,
                    np.where(offset < PERSON_PROPORTION + AUCTION_PROPORTION, 1, 2))


def nexmark_events(start: int, stop: int, config: NexmarkConfig | None = None
                   ) -> dict[str, pa.Table]:
    """Events ``[start, stop)`` as three tables, each sorted by event time and ``event_id``.

    The tables are ``person``, ``auction`` and ``bid`` (:data:`SCHEMAS`).
    """
    config = config or NexmarkConfig()
    if not 0 <= start <= stop:
        raise ConfigError(f"nexmark events [{start}, {stop}): need 0 <= start <= stop")
    n = np.arange(start, stop, dtype=np.int64)
    kinds = kinds_of(n)
    pools = {spaces: _pool(config.seed, spaces) for spaces in (False, True)}
    return {kind: _BUILD[kind](n[kinds == i], config, pools) for i, kind in enumerate(KINDS)}


def _chunks(events: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, events, size):
        yield start, min(start + size, events)


def write_nexmark(out: str | Path, events: int, config: NexmarkConfig | None = None, *,
                  rows_per_file: int = 1_000_000, chunk: int = 200_000,
                  progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Write ``events`` events under ``out`` as ``<kind>/part-NNNNN.parquet``; rows per kind.

    ``out`` must not exist or be empty (nothing is overwritten). Files hold at most
    ``rows_per_file`` rows each and sort by name in event-time order. ``progress`` is called
    with the number of events written after each chunk of ``chunk`` events.
    """
    if events < 0:
        raise ConfigError(f"--events {events}: give a count >= 0")
    if rows_per_file < 1 or chunk < 1:
        raise ConfigError(f"rows per file {rows_per_file} and chunk {chunk} must be >= 1")
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ConfigError(f"--out {root} exists and is not an empty directory; name a new one "
                          f"(nothing there is overwritten)")
    for kind in KINDS:
        (root / kind).mkdir(parents=True, exist_ok=True)
    writers: dict[str, pq.ParquetWriter] = {}
    rows = dict.fromkeys(KINDS, 0)
    try:
        for start, stop in _chunks(events, chunk):
            for kind, table in nexmark_events(start, stop, config).items():
                while table.num_rows:
                    room = rows_per_file - rows[kind] % rows_per_file
                    if rows[kind] % rows_per_file == 0:
                        if kind in writers:
                            writers.pop(kind).close()
                        path = root / kind / f"part-{rows[kind] // rows_per_file:05d}.parquet"
                        writers[kind] = pq.ParquetWriter(path, SCHEMAS[kind])
                    writers[kind].write_table(table.slice(0, room))
                    rows[kind] += min(room, table.num_rows)
                    table = table.slice(room)
            if progress is not None:
                progress(stop)
    finally:
        for writer in writers.values():
            writer.close()
    return rows


def expected_counts(events: int) -> dict[str, int]:
    """How many of the first ``events`` events are persons, auctions and bids."""
    cycles, rest = divmod(events, PROPORTION_DENOMINATOR)
    person = cycles * PERSON_PROPORTION + min(rest, PERSON_PROPORTION)
    auction = cycles * AUCTION_PROPORTION + max(0, min(rest - PERSON_PROPORTION,
                                                       AUCTION_PROPORTION))
    return {"person": person, "auction": auction, "bid": events - person - auction}


__all__ = ["BASE_TIME_MS", "KINDS", "SCHEMAS", "NexmarkConfig", "event_times", "expected_counts",
           "kinds_of", "last_auction", "last_person", "nexmark_events", "write_nexmark"]
