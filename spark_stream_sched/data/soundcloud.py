"""SoundCloud-like sample data: comments that users post about songs.

The model follows the SoundCloud dataset of Gulisano et al. (2016) (Table 2, queries K-*, f-*, F-*):
a stream of comments ``(ts, song, user, text)`` over ``n_songs`` songs (40,000 by default) with
Zipf-like popularity, spread over ``n_inputs`` input streams (e.g. front-end servers). Some comments
contain an e-mail address and some an IPv4 address, so that the "first/count comment containing a
mail (or IP) address" queries have something to find.

Timestamps have second resolution by default (``tick_ms=1000``), like the original data, so
equal timestamps are common. Every stream is sorted by ``ts``. Generation is vectorised with
NumPy and Arrow compute kernels and seeded by ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError

#: 2013-01-01T00:00:00Z in ms.
SOUNDCLOUD_START_TS = 1_356_998_400_000

#: Columns of every comment stream, in order.
SOUNDCLOUD_COLUMNS = ("ts", "song", "user", "text")

#: Regular expressions (no backslashes, so they survive any string-literal quoting) that match
#: the e-mail and IPv4 addresses the generator embeds in comments.
MAIL_REGEX = "[A-Za-z0-9._-]+@[A-Za-z0-9-]+[.][A-Za-z]+"
IP_REGEX = "[0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}"

_PHRASES = (
    "love this track", "great drop at the end", "this beat is sick", "on repeat all day",
    "the vocals here are amazing", "who made this remix", "reminds me of summer", "so chill",
    "need the download link", "best part right here", "underrated artist", "more like this please",
    "the bass line is unreal", "goosebumps", "this should be on the radio", "nice mix",
)
_NAMES = ("anna", "dj.kev", "lou_p", "marta", "nico", "sam-k", "tobi", "zoe")
_DOMAINS = ("example.com", "mail.org", "inbox.net", "music.io")


def soundcloud_streams(
    n_inputs: int = 8,
    rows: int = 100_000,
    *,
    n_songs: int = 40_000,
    n_users: int = 20_000,
    rate_per_s: float = 2_000.0,
    tick_ms: int = 1_000,
    mail_rate: float = 0.05,
    ip_rate: float = 0.03,
    zipf_s: float = 1.0,
    start_ts: int = SOUNDCLOUD_START_TS,
    seed: int = 0,
) -> list[pa.Table]:
    """Generate comments as one table per input stream.

    Parameters
    ----------
    n_inputs, rows : int
        Input streams (>= 1; each comment goes to a uniformly random one) and comments over all.
    n_songs, n_users : int
        Sizes of the song and user id domains (ids are ``0 .. n - 1``).
    rate_per_s, tick_ms : float, int
        Mean comments per second of event time (Poisson arrivals); timestamps are floored to a
        multiple of ``tick_ms`` (ties).
    mail_rate, ip_rate : float
        Independent probabilities that a comment contains an e-mail / an IPv4 address.
    zipf_s : float
        Exponent of song popularity: song of popularity rank r has weight ``1 / r**zipf_s``.
    start_ts, seed : int
        Event time origin (ms since the epoch); seed of ``numpy.random.default_rng``.

    Returns
    -------
    list of pyarrow.Table
        ``n_inputs`` tables with columns ``ts`` (int64 ms), ``song`` (int64), ``user``
        (int64) and ``text`` (string, never null); each sorted by ``ts``. Row counts sum to
        ``rows``.

    Raises
    ------
    ConfigError
        If a parameter is out of range.
    """
    _validate(n_inputs, rows, n_songs, n_users, rate_per_s, tick_ms, mail_rate, ip_rate)
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1000.0 / rate_per_s, rows)
    ts = ((start_ts + np.cumsum(gaps)).astype(np.int64) // tick_ms) * tick_ms
    song = _songs(rng, rows, n_songs, zipf_s)
    user = rng.integers(0, n_users, rows, dtype=np.int64)
    text = _texts(rng, rows, mail_rate, ip_rate)
    which = rng.integers(0, n_inputs, rows)
    order = np.argsort(which, kind="stable")
    table = pa.table({"ts": ts, "song": song, "user": user, "text": text}).take(order)
    counts = np.bincount(which, minlength=n_inputs)
    starts = np.cumsum(counts) - counts
    return [table.slice(int(lo), int(n)) for lo, n in zip(starts, counts, strict=True)]


def _validate(n_inputs: int, rows: int, n_songs: int, n_users: int, rate: float, tick: int,
              mail_rate: float, ip_rate: float) -> None:
    """Raise ConfigError naming the first parameter that is out of range."""
    checks = [
        ("n_inputs", n_inputs >= 1), ("rows", rows >= 0), ("n_songs", n_songs >= 1),
        ("n_users", n_users >= 1), ("rate_per_s", rate > 0), ("tick_ms", tick >= 1),
        ("mail_rate", 0.0 <= mail_rate <= 1.0), ("ip_rate", 0.0 <= ip_rate <= 1.0),
    ]
    for name, ok in checks:
        if not ok:
            raise ConfigError(f"soundcloud_streams: {name} is out of range")


def _songs(rng: np.random.Generator, rows: int, n_songs: int, zipf_s: float) -> np.ndarray:
    """Draw song ids with Zipf-like popularity; popular ids are scattered over the range."""
    weights = 1.0 / np.arange(1, n_songs + 1, dtype=np.float64) ** zipf_s
    rank = rng.choice(n_songs, size=rows, p=weights / weights.sum())
    return rng.permutation(n_songs).astype(np.int64)[rank]


def _pick(rng: np.random.Generator, words: tuple[str, ...], rows: int) -> pa.Array:
    """Draw ``rows`` strings uniformly from ``words``."""
    return pa.array(words).take(pa.array(rng.integers(0, len(words), rows)))


def _texts(rng: np.random.Generator, rows: int, mail_rate: float, ip_rate: float) -> pa.Array:
    """Build comment texts: a phrase, sometimes followed by an e-mail and/or IPv4 address."""
    phrase = _pick(rng, _PHRASES, rows)
    has_mail = rng.random(rows) < mail_rate
    has_ip = rng.random(rows) < ip_rate
    mail = _scatter(has_mail, _mails(rng, int(has_mail.sum())))
    ip = _scatter(has_ip, _ips(rng, int(has_ip.sum())))
    return pc.binary_join_element_wise(phrase, mail, ip, "")


def _mails(rng: np.random.Generator, n: int) -> pa.Array:
    """Build ``n`` suffixes such as `` mail me at nico42@example.com``."""
    number = pc.cast(pa.array(rng.integers(0, 1000, n)), pa.string())
    return pc.binary_join_element_wise(
        " mail me at ", _pick(rng, _NAMES, n), number, "@", _pick(rng, _DOMAINS, n), "")


def _ips(rng: np.random.Generator, n: int) -> pa.Array:
    """Build ``n`` suffixes such as `` my server is 10.3.77.201``."""
    octets = [pc.cast(pa.array(rng.integers(1, 255, n)), pa.string()) for _ in range(4)]
    return pc.binary_join_element_wise(" my server is ", octets[0], ".", octets[1], ".",
                                       octets[2], ".", octets[3], "")


def _scatter(mask: np.ndarray, values: pa.Array) -> pa.Array:
    """Spread ``values`` (in order) over the set positions of ``mask``; ``""`` elsewhere."""
    index = np.where(mask, np.cumsum(mask), 0)
    return pa.concat_arrays([pa.array([""]), values.cast(pa.string())]).take(pa.array(index))
