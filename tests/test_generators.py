"""The sample-data generators are seeded, sorted per input, shaped like Gulisano et al. (2016)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_stream_sched.data.smart_grid import SMART_GRID_COLUMNS, smart_grid_streams
from spark_stream_sched.data.soundcloud import (
    IP_REGEX,
    MAIL_REGEX,
    SOUNDCLOUD_COLUMNS,
    soundcloud_streams,
)
from spark_stream_sched.errors import ConfigError


def _sorted(table: pa.Table) -> bool:
    return bool(np.all(np.diff(table.column("ts").to_numpy()) >= 0))


def _has_ties(tables: list[pa.Table]) -> bool:
    return any(len(np.unique(t.column("ts").to_numpy())) < t.num_rows for t in tables)


@pytest.mark.parametrize("n_inputs", [1, 3, 8])
def test_smart_grid_is_sorted_per_input_with_ties(n_inputs: int) -> None:
    streams = smart_grid_streams(n_inputs, rows=20_000, seed=1)
    assert len(streams) == n_inputs
    assert sum(t.num_rows for t in streams) == 20_000
    assert all(_sorted(t) for t in streams)
    assert _has_ties(streams)
    for i, table in enumerate(streams):
        assert tuple(table.column_names) == SMART_GRID_COLUMNS
        assert set(table.column("dc").to_pylist()) == {i}


def test_smart_grid_is_deterministic_per_seed() -> None:
    first = smart_grid_streams(4, rows=5_000, null_rate=0.1, seed=7)
    again = smart_grid_streams(4, rows=5_000, null_rate=0.1, seed=7)
    other = smart_grid_streams(4, rows=5_000, null_rate=0.1, seed=8)
    assert all(a.equals(b) for a, b in zip(first, again, strict=True))
    assert not all(a.equals(b) for a, b in zip(first, other, strict=True))


def test_smart_grid_schema_alarms_nulls_and_paths() -> None:
    streams = smart_grid_streams(6, 50, rows=30_000, alarm_rate=0.05, null_rate=0.1,
                                 paths_per_meter=2, seed=3)
    table = pa.concat_tables(streams)
    assert table.schema.field("ts").type == pa.int64()
    assert table.schema.field("meter").type == pa.int64()
    assert table.schema.field("value").type == pa.float64()
    assert set(table.column("kind").to_pylist()) == {"reading", "alarm"}
    alarms = table.filter(pc.equal(table.column("kind"), "alarm"))
    assert alarms.column("value").to_pylist() == [0.0] * alarms.num_rows
    assert 0.05 < table.column("value").null_count / table.num_rows < 0.15
    assert set(table.column("meter").to_pylist()) == set(range(50))
    inputs_per_meter = {m: set() for m in range(50)}
    for i, stream in enumerate(streams):
        for meter in set(stream.column("meter").to_pylist()):
            inputs_per_meter[meter].add(i)
    assert all(1 <= len(s) <= 2 for s in inputs_per_meter.values())
    assert any(len(s) == 2 for s in inputs_per_meter.values())


def test_smart_grid_duration_and_string_ids() -> None:
    streams = smart_grid_streams(3, 10, duration_ms=60_000, string_meter_ids=True,
                                 reading_interval_ms=1_000, start_ts=0, seed=2)
    table = pa.concat_tables(streams)
    ts = table.column("ts").to_numpy()
    assert ts.min() >= 0
    assert ts.max() < 60_000
    # every meter reads once per second: about 60 readings each
    assert 590 <= table.num_rows <= 610
    assert table.schema.field("meter").type == pa.string()
    assert sorted(set(table.column("meter").to_pylist()))[:2] == ["SM-00000", "SM-00001"]


@pytest.mark.parametrize("kwargs", [
    {"rows": 10, "duration_ms": 10}, {"n_inputs": 0}, {"null_rate": 1.5}, {"tick_ms": 0},
])
def test_smart_grid_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        smart_grid_streams(**kwargs)  # type: ignore[arg-type]


def test_soundcloud_shape_sorted_and_deterministic() -> None:
    streams = soundcloud_streams(5, 20_000, n_songs=1_000, seed=4)
    again = soundcloud_streams(5, 20_000, n_songs=1_000, seed=4)
    assert all(a.equals(b) for a, b in zip(streams, again, strict=True))
    assert sum(t.num_rows for t in streams) == 20_000
    assert all(_sorted(t) for t in streams)
    assert _has_ties(streams)
    table = pa.concat_tables(streams)
    assert tuple(table.column_names) == SOUNDCLOUD_COLUMNS
    songs = table.column("song").to_numpy()
    assert songs.min() >= 0
    assert songs.max() < 1_000
    assert table.column("text").null_count == 0


def test_soundcloud_texts_hold_mail_and_ip_addresses() -> None:
    table = pa.concat_tables(soundcloud_streams(2, 20_000, mail_rate=0.1, ip_rate=0.05, seed=5))
    mail = pc.sum(pc.match_substring_regex(table.column("text"), MAIL_REGEX)).as_py()
    ip = pc.sum(pc.match_substring_regex(table.column("text"), IP_REGEX)).as_py()
    assert 0.08 < mail / 20_000 < 0.12
    assert 0.035 < ip / 20_000 < 0.065
    none = pa.concat_tables(soundcloud_streams(2, 2_000, mail_rate=0.0, ip_rate=0.0, seed=5))
    assert not pc.any(pc.match_substring_regex(none.column("text"), MAIL_REGEX)).as_py()
    assert not pc.any(pc.match_substring_regex(none.column("text"), IP_REGEX)).as_py()


def test_soundcloud_song_popularity_is_skewed() -> None:
    table = pa.concat_tables(soundcloud_streams(1, 50_000, n_songs=40_000, seed=6))
    counts = np.sort(np.bincount(table.column("song").to_numpy()))[::-1]
    assert counts[0] > 20 * np.median(counts[counts > 0])
