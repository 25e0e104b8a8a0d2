"""Distributed adaptation in the ``ordered-agg`` source, driven as Spark's runner would (no JVM).

The driver's ``partitions()`` decides each batch's group -> task assignment from the previous
batch's recorded metrics (Liu & Rundensteiner 2005, §5-§6), records it under the batch's end version
before any task runs, and splits the rows by it; a batch planned again reuses the record. The join's
result must equal the batch oracle whatever moved or was pushed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs import split as read_once
from spark_stream_sched.inputs.offsets import parse_offset, version_id
from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.query import spec_from_options
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader
from spark_stream_sched.spark.source_plan import GroupRangePartition
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

from .datagen import make_stream, write_stream
from .helpers import drive_batches
from .test_source_owner import run_batches

JOIN = {"keyColumns": "meter", "operators": "join(3, within=3 seconds)"}


def write_join_inputs(root: Path, rows: int = 400) -> list[Any]:
    tables = [make_stream(3, j, rows + 20 * j, n_keys=12) for j in range(3)]
    for j, table in enumerate(tables):
        write_stream(table, str(root / f"in{j}"), 4)
    return tables


def reader_for(root: Path, **extra: str) -> OrderedAggStreamReader:
    opts = {"inputs": ",".join(str(root / f"in{j}") for j in range(3)),
            "stateLocation": str(root / "state"), "endOfInput": "availableNow",
            "partitionGroups": "8", "numPartitions": "2", **JOIN, **extra}
    source = OrderedAggDataSource(opts)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, OrderedAggStreamReader)
    return reader


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def advance(reader: OrderedAggStreamReader, batches: int) -> dict[str, Any]:
    """Run and commit ``batches`` batches; return the offset the next one starts from."""
    return run_batches(reader, batches)


@pytest.mark.parametrize(("policy", "budget"), [("lazy-disk", "700"), ("active-disk", "900")])
def test_adaptive_join_moves_groups_and_equals_the_oracle(tmp_path: Path, policy: str,
                                                          budget: str) -> None:
    tables = write_join_inputs(tmp_path)
    reader = reader_for(tmp_path, adaptation=policy, stateMemoryBudget=budget)
    rows, planned = drive_batches(reader, 150)
    assert canonical(rows) == canonical(reference_pipeline(tables, spec_from_options(JOIN, 3)))
    location = str(tmp_path / "state")
    records = [assignments.read_assignment(location, v)
               for v in assignments.recorded_versions(location)]
    assert len(records) == len(planned) > 3
    assert sum(len(r.moves) for r in records if r) > 0, "no group moved"
    assert any(r.pushes for r in records if r), "nothing was pushed to disk"
    for parts, record in zip(planned, records, strict=True):
        assert record is not None
        assert [p.groups for p in parts] == [record.groups_of(t) for t in range(record.tasks)]
        assert sorted(g for p in parts for g in p.pushes) == list(record.pushes)
    merged = batch_metrics.read_batches(location)
    assert [b["assignment"] for b in merged] == [
        {str(t): list(r.groups_of(t)) for t in range(r.tasks)} for r in records if r]
    assert [b["pushed_groups"] for b in merged] == [list(r.pushes) for r in records if r]


@pytest.mark.slow
@pytest.mark.parametrize("operators", [
    "join(3, within=10 seconds); running(count(*) as rn); delta(ts) as gap",
    "join(3, within=10 seconds, budget=0); running(count(*) as rn); delta(ts) as gap",
])
def test_a_spilling_join_followed_by_stages_and_a_window_equals_the_oracle(
        tmp_path: Path, operators: str) -> None:
    # Pushed groups (by the distributed policy, or by the join's own budget=0 after every
    # update), order-sensitive stages and a window over the join's results: the join holds back
    # what a missing result could precede, so every running count, gap and window equals the
    # oracle's (releasing clean-up results late, or closing windows early, fails here).
    query = {**JOIN, "operators": operators, "window": "4 seconds",
             "aggregates": "count(*) as n, first(rn) as fr, max(gap) as mg, last(value_2) as l2"}
    tables = write_join_inputs(tmp_path)
    reader = reader_for(tmp_path, adaptation="lazy-disk", stateMemoryBudget="700", **query)
    rows, _ = drive_batches(reader, 30)  # batches of ~3 s: clean-up comes batches after a push
    want = reference_pipeline(tables, spec_from_options(query, 3))
    assert len(want) > 50
    assert canonical(rows) == canonical(want)
    if "budget=" not in operators:  # the join's own budget=0 leaves the policy nothing to push
        location = str(tmp_path / "state")
        records = [assignments.read_assignment(location, v)
                   for v in assignments.recorded_versions(location)]
        assert any(r.pushes for r in records if r), "nothing was pushed to disk"


def test_each_task_file_holds_the_rows_of_its_assigned_groups(tmp_path: Path) -> None:
    write_join_inputs(tmp_path)
    reader = reader_for(tmp_path, adaptation="lazy-disk", splitRows="driver")
    start = advance(reader, 3)
    end = reader.latestOffset(start, ReadMaxRows(150))
    parts = reader.partitions(start, end)
    assert [p.groups for p in parts] != [(0, 1, 2, 3), (4, 5, 6, 7)], "nothing moved"
    c = reader._plan.config

    def group_ids(rows: Any) -> Any:
        return group_of_rows(rows, c.spec.key_columns, c.partition_groups)

    seen = 0
    for part in parts:
        assert isinstance(part, GroupRangePartition)
        assert part.rows_file is not None
        mine = read_once.read_task_rows(part.rows_file)
        assert mine is not None
        assert set(group_ids(mine).tolist()) <= set(part.groups)
        seen += mine.num_rows
    assert seen == parts[0].rows_total


def test_a_batch_planned_again_reuses_its_recorded_assignment(tmp_path: Path) -> None:
    write_join_inputs(tmp_path)
    reader = reader_for(tmp_path, adaptation="lazy-disk", stateMemoryBudget="700")
    location, start = str(tmp_path / "state"), advance(reader, 2)
    end = reader.latestOffset(start, ReadMaxRows(150))
    first = [(p.groups, p.pushes) for p in reader.partitions(start, end)]
    record = assignments.read_assignment(location, version_id(parse_offset(end, 3)))
    assert record is not None
    assert (record.moves or record.pushes)
    # the driver crashed after planning and the previous batch's metrics are gone: planning
    # afresh would find no metrics (no adaptation), but the replay runs the recorded plan
    shutil.rmtree(batch_metrics.metrics_dir(location))
    assert [(p.groups, p.pushes) for p in reader.partitions(start, end)] == first
    assert [(p.groups, p.pushes) for p in reader.partitions(start, end)] != [
        ((0, 1, 2, 3), ()), ((4, 5, 6, 7), ())]


def test_same_metrics_give_the_same_assignment_when_the_record_is_lost(tmp_path: Path) -> None:
    write_join_inputs(tmp_path)
    location = str(tmp_path / "state")
    for batches in (1, 2, 3):
        shutil.rmtree(location, ignore_errors=True)
        reader = reader_for(tmp_path, adaptation="lazy-disk", stateMemoryBudget="700")
        start = advance(reader, batches)
        end = reader.latestOffset(start, ReadMaxRows(150))
        planned = [(p.groups, p.pushes) for p in reader.partitions(start, end)]
        version = version_id(parse_offset(end, 3))
        record = assignments.read_assignment(location, version)
        os.unlink(assignments.record_path(location, version))
        assert [(p.groups, p.pushes) for p in reader.partitions(start, end)] == planned
        assert assignments.read_assignment(location, version) == record
        reader.stop()


def test_without_adaptation_groups_stay_in_ranges_and_nothing_is_recorded(
        tmp_path: Path) -> None:
    tables = write_join_inputs(tmp_path, rows=200)
    rows, planned = drive_batches(reader_for(tmp_path), 150)
    assert canonical(rows) == canonical(reference_pipeline(tables, spec_from_options(JOIN, 3)))
    assert all([p.groups for p in parts] == [(0, 1, 2, 3), (4, 5, 6, 7)] for parts in planned)
    assert assignments.recorded_versions(str(tmp_path / "state")) == []


def test_bad_adaptation_option_fails_when_the_query_is_defined(tmp_path: Path) -> None:
    write_join_inputs(tmp_path, rows=50)
    with pytest.raises(ConfigError, match=r"option thetaD='2' must be in \(0, 1\]"):
        reader_for(tmp_path, adaptation="lazy-disk", thetaD="2")
