"""Every door's batch records under the common names of ``spark_stream_sched.figures``.

The ``ordered()`` progress below is Spark's own JSON of the README's ``ordered()`` example
(pyspark 4.3, two micro-batches), cut to the fields read; the source's and the sink's records
are written as their tasks and commits write them in ``tests/test_progress.py``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.figures import (
    FIELDS,
    ordered_figures,
    sink_figures,
    source_figures,
    with_rates,
)
from spark_stream_sched.progress import batches, format_line, ordered_progress
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX


def _operator(memory: int, sst: int) -> dict[str, Any]:
    return {"operatorName": "applyInPandasWithState", "memoryUsedBytes": memory,
            "numRowsDroppedByWatermark": 0, "customMetrics": {"rocksdbSstFileSize": sst}}


ORDERED_PROGRESS: list[dict[str, Any]] = [
    {"id": "cd326c08", "name": None, "timestamp": "2026-12-02T10:08:04.406Z", "batchId": 0,
     "numInputRows": 100000, "durationMs": {"triggerExecution": 15531},
     "stateOperators": [_operator(8824, 1842573)],
     "observedMetrics": {"ordered_agg_in": {"rows_in": 100000, "newest_ts": 1335830500200,
                                            "input_max": [1335830500200, None]},
                         "ordered_agg_out": {"windows_out": 0}}},
    {"id": "cd326c08", "name": None, "timestamp": "2026-12-02T10:08:19.965Z", "batchId": 1,
     "numInputRows": 2, "durationMs": {"triggerExecution": 2105},
     "stateOperators": [_operator(1959216, 1850475)],
     "observedMetrics": {"ordered_agg_in": {"rows_in": 0, "newest_ts": None,
                                            "input_max": [EVENT_TIME_MAX, EVENT_TIME_MAX]},
                         "ordered_agg_out": {"windows_out": 43000}}},
]


class _Progress(dict):  # type: ignore[type-arg]
    """Like pyspark's StreamingQueryProgress: a dict of Python objects, and its JSON."""

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw, id=uuid.UUID(int=7))  # not JSON-serializable, as in pyspark
        self.json = json.dumps(raw)


def test_ordered_figures_from_sparks_progress_json_and_objects() -> None:
    """Rows in without the 2 end-of-input rows Spark counts; no lag while an input has sent
    nothing, lag 0 once all finished."""
    other = {**ORDERED_PROGRESS[0], "observedMetrics": {}}  # another query's progress
    as_objects = [_Progress(p) for p in ORDERED_PROGRESS]
    for progress in (ORDERED_PROGRESS, as_objects):
        first, last = ordered_figures([*progress, other])
        assert (first["rows_in"], first["windows_out"], first["lag_ms"]) == (100000, 0, None)
        assert (last["rows_in"], last["windows_out"], last["lag_ms"]) == (0, 43000, 0)
        assert (first["state_bytes"], last["state_bytes"]) == (1842573, 1850475)
        assert last["batch_seconds"] == 2.105
        assert last["ended_at"] == pytest.approx(1796206101.965 + 2.105)
    assert [b["batch_id"] for b in ordered_progress(ORDERED_PROGRESS, after=0)] == [1]
    assert format_line(ordered_progress(ORDERED_PROGRESS)[1]) == (
        "ordered-agg ordered batch 1: 0 rows in, 43,000 windows out, 0 late dropped, "
        "state 1,850,475 B, lag 0 ms, 2.10 s")


def test_an_ordered_bound_below_the_newest_event_time_is_the_lag() -> None:
    """R is the least of the inputs' largest event times so far; the lag is the newest minus R."""
    progress = [{**ORDERED_PROGRESS[1], "observedMetrics": {
        "ordered_agg_in": {"rows_in": 5, "newest_ts": ts, "input_max": seen},
        "ordered_agg_out": {"windows_out": 1}}} for ts, seen in [
            (1335830415000, [1335830415000, 1335830410000]),
            (1335830412000, [None, 1335830412000])]]  # input 0 sent nothing in batch 2
    first, second = ordered_figures(progress)
    assert first["lag_ms"] == 1335830415000 - 1335830410000
    assert second["lag_ms"] == 1335830415000 - 1335830412000


def test_sink_markers_give_per_batch_drops_and_lag() -> None:
    markers = [{"batch_id": 0, "order": 0, "rows_in": 10, "rows_out": 0, "dropped": 2,
                "input_max": [50, None], "ready_bound": None, "started_at": 1.0,
                "committed_at": 3.5, "state_bytes": 99},
               {"batch_id": 1, "order": 1, "rows_in": 10, "rows_out": 4, "dropped": 5,
                "input_max": [90, 70], "ready_bound": 70},
               {"batch_id": "final", "order": 2, "rows_in": 0, "rows_out": 1, "dropped": 5,
                "input_max": [90, 70], "ready_bound": 2**63 - 1}]
    first, second, final = sink_figures(markers)
    assert [b["late_dropped"] for b in (first, second, final)] == [2, 3, 0]
    assert [b["lag_ms"] for b in (first, second, final)] == [None, 20, 0]
    assert (first["batch_seconds"], second["batch_seconds"]) == (2.5, None)
    assert [b["windows_out"] for b in (first, second, final)] == [0, 4, 1]


def test_source_records_keep_their_fields_and_gain_the_common_ones() -> None:
    record = {"batch_id": 3, "rows_read": 7, "windows_out": 2, "late_dropped": 1,
              "state_bytes": 10, "lag_ms": 4, "seconds": 0.25, "join_pushed_bytes": 5,
              "join_held_pushed_bytes": 6, "rows_released": 6}
    figures = source_figures(record)
    assert set(FIELDS) <= set(figures)
    assert figures["rows_released"] == 6
    assert (figures["rows_in"], figures["spill_bytes"], figures["batch_seconds"]) == (7, 11, 0.25)
    timed = source_figures({**record, "started_at": 10.0, "ended_at": 12.5})
    assert (timed["batch_seconds"], timed["ended_at"]) == (2.5, 12.5)


def test_rates_divide_by_the_wall_time_since_the_previous_batch_ended() -> None:
    rated = with_rates([{"rows_in": 100, "batch_seconds": 0.5, "ended_at": 10.0},
                        {"rows_in": 100, "batch_seconds": 0.5, "ended_at": 20.0},
                        {"rows_in": 100, "batch_seconds": 0.0, "ended_at": None},
                        {"rows_in": 100, "batch_seconds": 2.0, "ended_at": None}])
    assert [b["rows_per_second"] for b in rated] == [200.0, 10.0, 0.0, 50.0]


def test_batches_tells_a_sink_location_from_a_source_location(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_progress import run_sink, write_source_batches

    run_sink(tmp_path, monkeypatch, "query-a")
    write_source_batches(str(tmp_path / "source"), 2)
    sink = batches(str(tmp_path / "ck" / "ordered-agg-sink"))
    source = batches(str(tmp_path / "source"))
    assert [b["door"] for b in sink] == ["sink"] * 4
    assert [b["door"] for b in source] == ["source"] * 2
    assert all(b["state_bytes"] > 0 and b["batch_seconds"] >= 0 for b in sink[:3])
    assert sum(b["windows_out"] for b in sink) > 0
    assert batches(str(tmp_path / "nothing")) == []


def test_saved_progress_reads_back_as_the_same_batches(tmp_path: Path) -> None:
    from spark_stream_sched.commands.report import load
    from spark_stream_sched.progress import save_progress

    path = str(tmp_path / "progress.jsonl")
    objects = [_Progress(p) for p in ORDERED_PROGRESS]
    assert save_progress(objects, path) == 2
    assert [b["windows_out"] for b in load(path)] == [0, 43000]
    assert [b["rows_in"] for b in load(path)] == [b["rows_in"] for b in
                                                  ordered_progress(ORDERED_PROGRESS)]
