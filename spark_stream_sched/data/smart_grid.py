"""Smart-grid sample data: meter readings forwarded by data concentrators.

The model follows the Energy Consumption dataset and Figure 1 of Gulisano et al. (2016): smart
meters report their consumption every ``reading_interval_ms``; a mesh network forwards each message
through one of the meter's data concentrators (a meter has ``paths_per_meter`` of them), and each
concentrator is one input stream of the multiway aggregate. A few messages are outage alarms.

Each concentrator's stream is sorted by ``ts`` (non-decreasing). Timestamps are floored to
``tick_ms`` so equal timestamps are common, both within one stream and across streams, which is
exactly the case the readiness rule (``ts < R``) has to get right.

Everything is vectorised with NumPy/PyArrow and seeded by ``numpy.random.default_rng(seed)``:
the same arguments always give identical tables.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError

#: 2012-05-01T00:00:00Z in ms, the start of the Energy Consumption dataset of Gulisano et al.
#: (2016).
SMART_GRID_START_TS = 1_335_830_400_000

#: Columns of every smart-grid stream, in order.
SMART_GRID_COLUMNS = ("ts", "meter", "value", "kind", "dc")

_DAY_MS = 86_400_000


def smart_grid_streams(n_inputs: int = 8, n_meters: int = 243, *, rows: int | None = None,
                       duration_ms: int | None = None, reading_interval_ms: int = 1_000,
                       tick_ms: int = 100, paths_per_meter: int = 2, alarm_rate: float = 0.001,
                       null_rate: float = 0.0, string_meter_ids: bool = False,
                       start_ts: int = SMART_GRID_START_TS, seed: int = 0) -> list[pa.Table]:
    """Generate smart-meter readings as one table per data concentrator.

    Parameters
    ----------
    n_inputs, n_meters : int
        Data concentrators (input streams) and smart meters (both >= 1).
    rows, duration_ms : int, optional
        Total messages over all streams, or every reading with ``start_ts <= ts < start_ts +
        duration_ms`` (not both; neither: 100,000 rows).
    reading_interval_ms, tick_ms : int
        Period of each meter's readings (random phase and jitter within it); timestamps are
        floored to a multiple of ``tick_ms`` (clock resolution: ties).
    paths_per_meter : int
        Concentrators a meter's messages may go through (capped at ``n_inputs``).
    alarm_rate, null_rate : float
        Fractions of outage alarms (``kind == 'alarm'``, ``value == 0.0``) and of readings with
        a null ``value`` (a lost measurement).
    string_meter_ids : bool
        Ids such as ``'SM-00042'`` instead of int64 meter numbers.
    start_ts, seed : int
        Event time of the first reading period (ms since the epoch); ``default_rng`` seed.

    Returns
    -------
    list of pyarrow.Table
        ``n_inputs`` tables sorted by ``ts`` with ``ts`` (int64 ms), ``meter`` (int64 or
        string), ``value`` (float64, nullable), ``kind`` (string), ``dc`` (int32, the list
        index); row counts sum to ``rows`` when given (a concentrator may receive none).

    Raises
    ------
    ConfigError
        A parameter out of range, or both ``rows`` and ``duration_ms``.
    """
    _validate(n_inputs, n_meters, rows, duration_ms, reading_interval_ms, tick_ms,
              paths_per_meter, alarm_rate, null_rate)
    rng = np.random.default_rng(seed)
    total = _message_count(n_meters, rows, duration_ms, reading_interval_ms)
    meter = np.arange(total, dtype=np.int64) % n_meters
    ts = _timestamps(rng, total, n_meters, reading_interval_ms, tick_ms, start_ts)
    if duration_ms is not None:
        keep = ts < start_ts + duration_ms
        ts, meter = ts[keep], meter[keep]
    value, is_alarm, is_null = _values(rng, ts, meter, n_meters, alarm_rate, null_rate)
    dc = _route(rng, meter, n_meters, n_inputs, paths_per_meter)
    columns = {"ts": ts, "meter": meter, "value": value, "alarm": is_alarm, "null": is_null}
    return _per_concentrator(columns, dc, n_inputs, n_meters, string_meter_ids)


def _per_concentrator(columns: dict[str, np.ndarray], dc: np.ndarray, n_inputs: int,
                      n_meters: int, string_meter_ids: bool) -> list[pa.Table]:
    """The messages as one table per concentrator, each sorted by ``ts`` (ties: generation)."""
    order = np.lexsort((np.arange(len(dc)), columns["ts"], dc))
    table = pa.table({
        "ts": pa.array(columns["ts"][order]),
        "meter": _meter_ids(columns["meter"][order], n_meters, string_meter_ids),
        "value": pa.array(columns["value"][order], mask=columns["null"][order]),
        "kind": pa.array(["reading", "alarm"]).take(
            pa.array(columns["alarm"][order].astype(np.int8))),
        "dc": pa.array(dc[order]),
    })
    counts = np.bincount(dc, minlength=n_inputs)
    starts = np.cumsum(counts) - counts
    return [table.slice(int(lo), int(n)) for lo, n in zip(starts, counts, strict=True)]


def _validate(n_inputs: int, n_meters: int, rows: int | None, duration_ms: int | None,
              interval: int, tick: int, paths: int, alarm_rate: float, null_rate: float) -> None:
    """Raise ConfigError naming the first parameter that is out of range."""
    if rows is not None and duration_ms is not None:
        raise ConfigError("give either rows or duration_ms, not both")
    checks = [
        ("n_inputs", n_inputs >= 1), ("n_meters", n_meters >= 1),
        ("rows", rows is None or rows >= 0),
        ("duration_ms", duration_ms is None or duration_ms >= 0),
        ("reading_interval_ms", interval >= 1), ("tick_ms", tick >= 1),
        ("paths_per_meter", paths >= 1), ("alarm_rate", 0.0 <= alarm_rate <= 1.0),
        ("null_rate", 0.0 <= null_rate <= 1.0),
    ]
    for name, ok in checks:
        if not ok:
            raise ConfigError(f"smart_grid_streams: {name} is out of range")


def _message_count(n_meters: int, rows: int | None, duration_ms: int | None, interval: int) -> int:
    """Return the number of messages to draw before an optional duration cut."""
    if duration_ms is not None:
        return (math.ceil(duration_ms / interval) + 1) * n_meters
    return 100_000 if rows is None else rows


def _timestamps(rng: np.random.Generator, total: int, n_meters: int, interval: int, tick: int,
                start_ts: int) -> np.ndarray:
    """Draw reading times: period start + meter phase + jitter, floored to ``tick``."""
    period = np.arange(total, dtype=np.int64) // n_meters
    phase = rng.integers(0, interval, n_meters, dtype=np.int64)
    jitter = rng.integers(0, max(1, interval // 4), total, dtype=np.int64)
    ts = start_ts + period * interval + phase[np.arange(total) % n_meters] + jitter
    return (ts // tick) * tick


def _values(rng: np.random.Generator, ts: np.ndarray, meter: np.ndarray, n_meters: int,
            alarm_rate: float, null_rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw consumption (kWh) with a daily cycle and noise, and the alarm and null masks."""
    base = rng.lognormal(mean=-1.0, sigma=0.5, size=n_meters)
    daily = 1.0 + 0.3 * np.sin(2.0 * np.pi * (ts % _DAY_MS) / _DAY_MS)
    noise = rng.gamma(shape=4.0, scale=0.25, size=len(ts))
    value = np.round(base[meter] * daily * noise, 3)
    is_alarm = rng.random(len(ts)) < alarm_rate
    value[is_alarm] = 0.0
    is_null = (rng.random(len(ts)) < null_rate) & ~is_alarm
    return value, is_alarm, is_null


def _route(rng: np.random.Generator, meter: np.ndarray, n_meters: int, n_inputs: int,
           paths: int) -> np.ndarray:
    """Route each message to one of its meter's ``paths`` distinct concentrators."""
    paths = min(paths, n_inputs)
    first = rng.permutation(n_meters) % n_inputs
    others = rng.permuted(np.tile(np.arange(1, n_inputs), (n_meters, 1)), axis=1)[:, : paths - 1]
    meter_paths = (first[:, None] + np.concatenate([np.zeros((n_meters, 1), np.int64), others],
                                                   axis=1)) % n_inputs
    choice = rng.integers(0, paths, len(meter))
    return np.asarray(meter_paths[meter, choice], dtype=np.int32)


def _meter_ids(meter: np.ndarray, n_meters: int, as_string: bool) -> pa.Array:
    """Return meter ids as int64, or as strings ``SM-00042``."""
    if not as_string:
        return pa.array(meter, type=pa.int64())
    names = pa.array([f"SM-{i:05d}" for i in range(n_meters)])
    return names.take(pa.array(meter))
