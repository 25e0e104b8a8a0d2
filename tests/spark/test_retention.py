"""Retention: a state location stays the same size however many batches a query runs.

Every file the source and the sink write under ``stateLocation`` has an owner and a deletion
rule (docs/state_store.md, "Retention"). These tests drive many small micro-batches through the
source's stream reader (in Spark's call order, no JVM) and through the sink's writer (with the
task identity faked), with files arriving and old input files deleted as a user's retention
would, and check that the location's file count and bytes stop growing; plus what a crash or a
finished ``Trigger.AvailableNow`` run leaves behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.inputs import manifest as input_manifest
from spark_stream_sched.inputs import split
from spark_stream_sched.runtime.state.atomic import temp_path
from spark_stream_sched.spark import sink
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader

from .helpers import drive_batches, run_available_now, source_options, write_inputs
from .test_sink import FakeTasks

N_INPUTS = 3
KEYS = np.array([f"m{k}" for k in range(6)])


def tick_rows(tick: int, input_id: int, rows: int = 12) -> pa.Table:
    """Input ``input_id``'s rows of one tick: event times within ``[tick, tick + 1)`` seconds."""
    rng = np.random.default_rng([tick, input_id])
    ts = 1_700_000_000_000 + tick * 1_000 + np.sort(rng.integers(0, 1_000, rows))
    return pa.table({"ts": pa.array(ts, pa.int64()), "meter": pa.array(KEYS[rng.integers(0, 6,
                                                                                      rows)]),
                     "value": pa.array(rng.normal(10, 3, rows).round(3))})


def location_size(root: Path) -> tuple[int, int]:
    """``(files, bytes)`` under ``root``."""
    sizes = [p.stat().st_size for p in root.rglob("*") if p.is_file()]
    return len(sizes), sum(sizes)


def stream_reader(opts: dict[str, str]) -> OrderedAggStreamReader:
    source = OrderedAggDataSource(opts)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, OrderedAggStreamReader)
    return reader


def source_opts(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"inputs": ",".join(str(tmp_path / f"in{j}") for j in range(N_INPUTS)),
            "stateLocation": str(tmp_path / "state"), "keyColumns": "meter",
            "window": "4 seconds", "slide": "2 seconds",
            "aggregates": "count(*) as n, first(value) as f, avg(value) as mean",
            "partitionGroups": "8", "numPartitions": "2", "keepMetrics": "5",
            "adaptation": "lazy-disk", "maxRecordsPerTrigger": "1000", **extra}


def write_tick(tmp_path: Path, tick: int, keep_files: int) -> None:
    """One new file per input; files older than ``keep_files`` ticks are deleted (consumed)."""
    for j in range(N_INPUTS):
        directory = tmp_path / f"in{j}"
        directory.mkdir(exist_ok=True)
        pq.write_table(tick_rows(tick, j), directory / f"part-{tick:06d}.parquet")
        old = directory / f"part-{tick - keep_files:06d}.parquet"
        old.unlink(missing_ok=True)


def run_source(tmp_path: Path, batches: int, keep_files: int = 4,
               **extra: str) -> list[tuple[int, int]]:
    """A streaming source, Spark's call order, one tick of files per batch; sizes per batch."""
    write_tick(tmp_path, 0, keep_files)
    reader = stream_reader(source_opts(tmp_path, **extra))
    sizes, start, previous = [], reader.initialOffset(), None
    for tick in range(batches):
        write_tick(tmp_path, tick, keep_files)
        end = reader.latestOffset(start, ReadMaxRows(1000))
        assert end != start, f"tick {tick} brought no rows"
        if previous is not None:
            reader.commit(previous)
        for part in reader.partitions(start, end):
            list(reader.read(part))
        previous = start = end
        sizes.append(location_size(tmp_path / "state"))
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize("split_rows", ["driver", "tasks"])
def test_source_location_stops_growing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       split_rows: str) -> None:
    # With the retention knobs small (5 metrics files and assignment records, manifests
    # compacted every 8 consumed files) every kind of file reaches its steady state within 30
    # batches; 90 batches later the location must be no larger. A file kept per batch (a
    # metrics file, an assignment record, a manifest line, a task's rows: 0.1-2 KB each)
    # would add 90 files and tens of KB.
    monkeypatch.setattr(input_manifest, "COMPACT_AT", 8)
    sizes = run_source(tmp_path, 120, splitRows=split_rows)
    first, last = sizes[:30], sizes[-30:]
    assert max(f for f, _ in last) <= max(f for f, _ in first), (first, last)
    assert max(b for _, b in last) <= 1.1 * max(b for _, b in first), (first, last)
    names = {p.relative_to(tmp_path / "state").parts[0] for p in (tmp_path / "state").rglob("*")}
    split = {"batches"} if split_rows == "driver" else set()  # the driver's split of the rows
    assert names == {"_lock", "_query.json", "_source.json", "_input_schema.json", "inputs",
                     "versions", "metrics", "assignments", *split}


def run_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: int
             ) -> list[tuple[int, int]]:
    """The sink's writer, one tick of every input per batch over 2 tasks; sizes per commit."""
    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": str(N_INPUTS), "inputColumn": "dc", "keyColumns": "meter",
            "window": "4s", "slide": "2s", "partitionGroups": "8",
            "aggregates": "count(*) as n, first(value) as f, avg(value) as mean",
            "keepVersions": "3", "keepMetrics": "5"}
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    state = Path(writer.config.state_location)
    sizes = []
    for tick in range(batches):
        rows = pa.concat_tables([tick_rows(tick, j).append_column(
            "dc", pa.array([j] * 12, pa.int32())) for j in range(N_INPUTS)])
        writer.commit(tasks.write(tick, [rows.slice(0, 18), rows.slice(18)]), tick)
        sizes.append(location_size(state))
    return sizes


@pytest.mark.slow
def test_sink_location_stops_growing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # keepVersions=3, keepMetrics=5: state versions, commit markers and staging reach their
    # steady state within 30 commits; a marker (about 1.5 KB) kept per batch would add 90
    # files. The output directory is the user's (one Parquet file per batch that closed
    # windows) and is not counted.
    sizes = run_sink(tmp_path, monkeypatch, 120)
    first, last = sizes[:30], sizes[-30:]
    assert max(f for f, _ in last) <= max(f for f, _ in first), (first, last)
    assert max(b for _, b in last) <= 1.1 * max(b for _, b in first), (first, last)
    state = tmp_path / "ck" / "ordered-agg-sink"
    assert len(list((state / "commits").iterdir())) == 5
    assert not any((state / "staging").iterdir())


def task_rows(state: Path) -> list[Path]:
    return sorted((state / split.SPILL_DIR).rglob("*.arrow"))


def test_a_finished_available_now_run_leaves_no_task_rows(tmp_path: Path) -> None:
    # Spark commits a batch's offsets to the source only when it plans the next batch, and ends
    # the source runner without stop(): the last batch is never committed. Its per-task rows
    # go at the final latestOffset, which finds nothing new.
    write_inputs(str(tmp_path / "in"), rows=300)
    reader = stream_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state")))
    _, planned = drive_batches(reader, 200)
    assert len(planned) > 3
    assert task_rows(tmp_path / "state") == []


@pytest.mark.spark
def test_available_now_through_spark_leaves_no_task_rows(spark: Any, tmp_path: Path) -> None:
    write_inputs(str(tmp_path / "in"), rows=300)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=400)
    batches = run_available_now(spark, opts, str(tmp_path / "ck"))
    assert len(batches) >= 3
    assert task_rows(tmp_path / "state") == []


def crashed_write(target: Path) -> Path:
    """The temporary file a process SIGKILLed between writing and renaming ``target`` leaves."""
    target.parent.mkdir(parents=True, exist_ok=True)
    leftover = Path(temp_path(str(target)))
    leftover.write_bytes(b"half a state file")
    return leftover


def test_a_restarted_source_sweeps_what_crashed_writes_left(tmp_path: Path) -> None:
    write_inputs(str(tmp_path / "in"), rows=300)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"))
    reader = stream_reader(opts)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(200))
    parts = reader.partitions(start, end)
    list(reader.read(parts[0]))  # a task wrote its groups' state; the driver dies now
    state = tmp_path / "state"
    version = next((state / "versions").iterdir())
    leftovers = [crashed_write(version / "group-0001.t0001.state"),
                 crashed_write(state / "metrics" / "batch-000000000000.json"),
                 crashed_write(state / "assignments" / "x.json")]
    kept = state / "versions" / ".not-ours.tmp"
    kept.write_bytes(b"a user's file")
    restarted = stream_reader(opts)
    restarted.prepareForTriggerAvailableNow()  # the first driver call of a restart: the lock
    assert [p for p in leftovers if p.exists()] == []
    assert task_rows(state) == []  # the restarted run plans every batch again
    assert kept.exists()  # only names of the form temp_path() gives are touched


def test_a_sink_commit_sweeps_what_crashed_writes_left(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": "1", "inputColumn": "dc", "keyColumns": "meter", "window": "4s",
            "aggregates": "count(*) as n"}
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    rows = [tick_rows(t, 0).append_column("dc", pa.array([0] * 12, pa.int32())) for t in (0, 9)]
    writer.commit(tasks.write(0, [rows[0]]), 0)
    state = Path(writer.config.state_location)
    leftovers = [crashed_write(state / "versions" / "batch-000000000001" / "group-0003.x.state"),
                 crashed_write(state / "commits" / "batch-000000000001.json"),
                 crashed_write(tmp_path / "out" / "part-batch-000000000001.parquet")]
    writer.commit(tasks.write(1, [rows[1]]), 1)
    assert [p for p in leftovers if p.exists()] == []
    assert os.path.exists(tmp_path / "out" / "part-batch-000000000001.parquet")
