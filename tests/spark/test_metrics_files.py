"""Per-batch metrics files: each read() writes its part, commit() merges them (no JVM).

Driven like Spark's source runner (``tests/spark/test_reader.py``); every figure is checked
against what the offsets and the output say it must be.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.inputs.offsets import lag_ms, parse_offset, version_id
from spark_stream_sched.runtime.state import batch_metrics

from .helpers import source_options, write_inputs
from .test_reader import make_reader


def _run(reader: Any, limit: int) -> list[tuple[Any, Any, int]]:
    """Run AvailableNow batches; per batch (start, end, output rows)."""
    reader.prepareForTriggerAvailableNow()
    start, done = reader.initialOffset(), []
    while (end := reader.latestOffset(start, ReadMaxRows(limit))) != start:
        rows = sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))
        reader.commit(end)
        done.append((parse_offset(start, 3), parse_offset(end, 3), rows))
        start = end
    return done


def test_metrics_are_written_per_partition_and_merged_per_batch(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=300)
    state = str(tmp_path / "state")
    reader = make_reader(source_options(str(tmp_path / "in"), 3, state, numPartitions=2,
                                        partitionGroups=4))
    batches = _run(reader, limit=200)
    assert len(batches) >= 4
    figures = batch_metrics.read_batches(state)
    assert [f["batch_id"] for f in figures] == list(range(len(batches)))
    for f, (start, end, out_rows) in zip(figures, batches, strict=True):
        assert f["version"] == version_id(end)
        assert f["partitions"] == 2
        assert f["rows_read"] == f["rows_of_partition"] == end.total_seq - start.total_seq
        assert f["windows_out"] == out_rows
        assert f["late_dropped"] == 0
        assert f["ready_bound"] == end.ready_bound()
        assert f["lag_ms"] == lag_ms(end)
        assert f["lag_ms"] >= 0
        assert f["newest_ts"] == max(c.last_ts for c in end.cursors if c.last_ts is not None)
        assert f["state_bytes"] > 0
        assert f["seconds"] > 0
    assert sum(f["rows_read"] for f in figures) == sum(t.num_rows for t in tables)
    # every row is released exactly once; nothing is left pending once all inputs finished
    assert sum(f["rows_released"] for f in figures) == sum(t.num_rows for t in tables)
    assert figures[-1]["rows_pending"] == 0
    assert figures[-1]["lag_ms"] == 0


def test_commit_merges_and_prunes_the_parts(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=200)
    state = str(tmp_path / "state")
    batches = _run(make_reader(source_options(str(tmp_path / "in"), 3, state)), limit=150)
    parts = os.listdir(os.path.join(batch_metrics.metrics_dir(state), "parts"))
    assert parts == [version_id(batches[-1][1])]  # older part directories are gone
    with open(batch_metrics.batch_path(state, len(batches) - 1)) as fh:
        merged = json.load(fh)
    assert merged["version"] == version_id(batches[-1][1])


def test_unmerged_last_batch_is_read_without_writing(tmp_path) -> None:
    """Spark commits batch n when it plans n + 1: the last batch's parts are read as they are."""
    write_inputs(str(tmp_path / "in"), rows=200)
    state = str(tmp_path / "state")
    reader = make_reader(source_options(str(tmp_path / "in"), 3, state))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(10_000))
    windows = sum(b.num_rows for p in reader.partitions(start, end) for b in reader.read(p))
    assert batch_metrics.batch_ids(state) == []
    (figures,) = batch_metrics.read_batches(state)
    assert figures["batch_id"] == 0
    assert figures["windows_out"] == windows
    assert batch_metrics.batch_ids(state) == []  # nothing written by reading


def test_old_batch_files_are_pruned(tmp_path) -> None:
    state = str(tmp_path)
    for batch_id in range(5):
        version = f"{batch_id:015d}-x"
        batch_metrics.write_part(state, version, 0, {"batch_id": batch_id, "rows_read": 1})
        batch_metrics.merge_batch(state, version)
        batch_metrics.prune(state, version, keep=3)
    assert batch_metrics.batch_ids(state) == [2, 3, 4]
