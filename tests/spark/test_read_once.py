"""Read once per micro-batch, the peeked-timestamp cache and AvailableNow batch sizing.

The stream reader is driven directly, as Spark's source runner would (no JVM): the driver
splits each batch's rows once into per-task files (``inputs/split.py``), ``latestOffset``
reads each file's timestamps once over the life of the reader, and a ``Trigger.AvailableNow``
run without ``maxRecordsPerTrigger`` admits larger micro-batches.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched import inputs
from spark_stream_sched.inputs import Cursor
from spark_stream_sched.inputs import split as read_once
from spark_stream_sched.inputs.cursors import EventTimeCache
from spark_stream_sched.inputs.offsets import parse_offset, version_id
from spark_stream_sched.inputs.plan import AVAILABLE_NOW_MAX_RECORDS, SourcePlan, rows_between
from spark_stream_sched.options.source import DEFAULT_MAX_RECORDS_PER_TRIGGER
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader
from spark_stream_sched.spark.source_plan import GroupRangePartition

from .helpers import (
    assert_matches_oracle,
    drive_batches,
    expected_rows,
    output_key,
    write_inputs,
)
from .helpers import source_options as query_options


def source_options(root: str, n_inputs: int, state: str, **extra: Any) -> dict[str, str]:
    """The query's options with the driver's split (``splitRows=driver``) unless overridden."""
    return query_options(root, n_inputs, state, **{"splitRows": "driver", **extra})


def make_reader(opts: dict[str, str]) -> OrderedAggStreamReader:
    source = OrderedAggDataSource(opts)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, OrderedAggStreamReader)
    return reader


def drive(reader: OrderedAggStreamReader, limit: int, split: bool = True
          ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """All batches; with ``split`` False every task reads the rows itself (the fallback)."""
    rows, planned = drive_batches(reader, limit, split)
    return sorted(rows, key=output_key), planned


@pytest.mark.parametrize("num_partitions", [1, 2, 3])
def test_each_row_is_in_exactly_one_task_file_in_stream_order(tmp_path, num_partitions) -> None:
    write_inputs(str(tmp_path / "in"), rows=200)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                                        numPartitions=num_partitions))
    plan: SourcePlan = reader._plan
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(250))
    parts = reader.partitions(start, end)
    assert len(parts) == num_partitions
    first, last = parse_offset(start, 3), parse_offset(end, 3)
    every = rows_between(plan, parts[0].files, first, last)
    groups = group_of_rows(every, plan.config.spec.key_columns, plan.config.partition_groups)
    for part in parts:
        assert isinstance(part, GroupRangePartition)
        assert part.rows_file is not None
        assert os.path.dirname(part.rows_file).endswith(version_id(last))
        mine = read_once.read_task_rows(part.rows_file)
        assert mine is not None
        assert mine.num_rows == int(np.isin(groups, part.groups).sum())
        mine_groups = group_of_rows(mine, plan.config.spec.key_columns,
                                    plan.config.partition_groups)
        assert (np.diff(mine_groups) >= 0).all()  # one run per group
        for g in part.groups:  # each group's rows: those of the whole batch, in stream order
            assert mine.filter(pa.array(mine_groups == g)).equals(
                every.filter(pa.array(groups == g)))
        assert part.rows_total == every.num_rows == 250
    assert sum(read_once.read_task_rows(p.rows_file).num_rows for p in parts) == 250


def test_split_and_fallback_give_the_oracles_rows(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"))
    split, planned = drive(make_reader(source_options(
        str(tmp_path / "in"), 3, str(tmp_path / "s1"), numPartitions=2)), 170)
    fallback, _ = drive(make_reader(source_options(
        str(tmp_path / "in"), 3, str(tmp_path / "s2"), numPartitions=2)), 170, split=False)
    assert len(planned) > 3
    assert split == fallback
    assert_matches_oracle(split, expected_rows(tables))


def batch_figures(state: str) -> list[tuple[int, int, int]]:
    """``(batch, rows_read, late_dropped)`` of every merged metrics file under ``state``."""
    import json
    from pathlib import Path

    files = sorted(Path(state, "metrics").glob("batch-*.json"))
    figures = [json.loads(path.read_text()) for path in files]
    return [(f["batch_id"], f["rows_read"], f["late_dropped"]) for f in figures]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_split_rows_in_tasks_gives_the_drivers_rows_and_figures(tmp_path, fmt: str) -> None:
    """``splitRows=tasks``: no per-task file; each task reads the batch and keeps its groups.

    CSV is admitted by rows as on the driver, so every batch's figures are the driver's;
    Parquet is admitted by whole row groups (``inputs/row_groups.py``): other batches, the
    same rows and totals.
    """
    tables = write_inputs(str(tmp_path / "in"), fmt=fmt)
    states = [str(tmp_path / "driver"), str(tmp_path / "tasks")]
    on_driver, _ = drive(make_reader(source_options(
        str(tmp_path / "in"), 3, states[0], numPartitions=3, format=fmt)), 170)
    in_tasks, planned = drive(make_reader(source_options(
        str(tmp_path / "in"), 3, states[1], numPartitions=3, splitRows="tasks", format=fmt)), 170)
    assert len(planned) > 3
    assert all(p.rows_file is None and p.rows_total is None for ps in planned for p in ps)
    spilled = read_once.spill_root(states[1])
    assert not os.path.isdir(spilled) or not os.listdir(spilled)  # nothing was split
    assert sorted(in_tasks, key=output_key) == sorted(on_driver, key=output_key)
    assert_matches_oracle(sorted(in_tasks, key=output_key), expected_rows(tables))
    figures, tasks_figures = batch_figures(states[0]), batch_figures(states[1])
    assert len(tasks_figures) == len(planned) - 1  # the last batch is committed by a next run
    if fmt == "csv":
        assert tasks_figures == figures
    else:
        assert all(0 < rows <= 170 for _, rows, _ in tasks_figures)
        assert tasks_figures != figures  # whole row groups: other batches


def test_task_files_are_pruned_on_commit_and_stop_and_rewritten_on_replay(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"))
    state = str(tmp_path / "state")
    reader = make_reader(source_options(str(tmp_path / "in"), 3, state))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(300))
    parts = reader.partitions(start, end)
    first = [b.to_pylist() for p in parts for b in reader.read(p)]
    os.remove(parts[0].rows_file)  # e.g. a driver restart: the replay plans the batch again
    again = reader.partitions(start, end)
    assert os.path.exists(again[0].rows_file)
    assert [b.to_pylist() for p in again for b in reader.read(p)] == first
    reader.commit(end)
    assert os.listdir(read_once.spill_root(state)) == []
    later = reader.latestOffset(end, ReadMaxRows(300))
    reader.partitions(end, later)
    assert os.listdir(read_once.spill_root(state)) == [version_id(parse_offset(later, 3))]
    reader.stop()
    assert os.listdir(read_once.spill_root(state)) == []


def test_metrics_count_the_whole_batch_not_the_tasks_share(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"))
    state = str(tmp_path / "state")
    reader = make_reader(source_options(str(tmp_path / "in"), 3, state, numPartitions=2))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(400))
    for part in reader.partitions(start, end):
        list(reader.read(part))
    from spark_stream_sched.runtime.state import batch_metrics

    merged = batch_metrics.merge_batch(state, version_id(parse_offset(end, 3)))
    assert merged is not None
    assert merged["rows_read"] == 400
    assert merged["rows_of_partition"] == 400  # each row went to exactly one task


def test_peeked_timestamps_are_read_once_per_file(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=400, files=4)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state")))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    offsets = []
    while True:  # small batches: every latestOffset peeks at rows it peeked at before
        end = reader.latestOffset(start, ReadMaxRows(60))
        if end == start:
            break
        offsets.append(end)
        start = end
    n_files = sum(len(inputs.list_files(str(tmp_path / "in" / f"in{j}"))) for j in range(3))
    assert len(offsets) > 10
    assert reader.driver._ts_cache is not None
    assert reader.driver._ts_cache.reads == n_files
    # the offsets equal those of a reader without the cache (a restart: a new, empty cache),
    # but for the owner token of the other query
    fresh = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state2")))
    fresh.prepareForTriggerAvailableNow()
    fresh.driver._ts_cache = EventTimeCache()
    start = fresh.initialOffset()
    for expected in offsets:
        start = fresh.latestOffset(start, ReadMaxRows(60))
        assert parse_offset(start, 3) == parse_offset(expected, 3)
        assert start["owner"] != expected["owner"]


def test_event_time_cache_keys_by_file_identity_and_forgets_consumed_files(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=1, rows=90, files=3)
    files = inputs.list_files(str(tmp_path / "in" / "in0"))
    reader = make_reader(source_options(str(tmp_path / "in"), 1, str(tmp_path / "state")))
    stream = reader._plan.streams[0]
    cache = EventTimeCache()
    plain = inputs.peek_event_times(stream, files, Cursor(), 90, "ts")
    cached = inputs.peek_event_times(stream, files, Cursor(), 90, "ts", cache)
    assert np.array_equal(plain, cached)
    assert cache.reads == 3
    inputs.peek_event_times(stream, files, Cursor(), 90, "ts", cache)
    assert cache.reads == 3
    os.utime(files[0], ns=(1, 1))  # another identity: read again, never a stale array
    inputs.peek_event_times(stream, files, Cursor(), 30, "ts", cache)
    assert cache.reads == 4
    cache.forget_before(files, Cursor(files[2], 0, 60))
    assert {k[0] for k in cache._times} == {files[2]}
    tiny = EventTimeCache(max_values=5)  # files larger than the cap are read uncached
    assert np.array_equal(inputs.peek_event_times(stream, files, Cursor(), 90, "ts", tiny),
                          plain)
    assert tiny.reads == 0


def test_available_now_admits_larger_batches_unless_the_limit_is_set(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"))
    default = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s1")))
    assert default.getDefaultReadLimit().max_rows == DEFAULT_MAX_RECORDS_PER_TRIGGER
    default.prepareForTriggerAvailableNow()
    assert default.getDefaultReadLimit().max_rows == AVAILABLE_NOW_MAX_RECORDS
    explicit = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s2"),
                                          maxRecordsPerTrigger=DEFAULT_MAX_RECORDS_PER_TRIGGER))
    explicit.prepareForTriggerAvailableNow()
    assert explicit.getDefaultReadLimit().max_rows == DEFAULT_MAX_RECORDS_PER_TRIGGER
    small = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s3"),
                                       maxRecordsPerTrigger=100))
    small.prepareForTriggerAvailableNow()
    start = small.initialOffset()
    end = small.latestOffset(start, small.getDefaultReadLimit())
    assert parse_offset(end, 3).total_seq == 100
