"""The stream reader driven directly, as Spark's source runner would (no JVM; fast).

``initialOffset → latestOffset(start, ReadMaxRows) → partitions → read → commit``: the output
must equal the oracle for any admission limit, replays must give identical rows, and state
problems must be clear errors.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_stream_sched.errors import OutOfOrderError, StateError
from spark_stream_sched.inputs.driver import KEEP_OLDER_VERSIONS
from spark_stream_sched.inputs.offsets import parse_offset, version_id
from spark_stream_sched.runtime.state.files import version_dir
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader

from .helpers import (
    assert_matches_oracle,
    expected_rows,
    output_key,
    source_options,
    write_inputs,
)


def make_reader(opts: dict[str, str]) -> OrderedAggStreamReader:
    source = OrderedAggDataSource(opts)
    return source.streamReader(source.schema())


def run_batches(reader: OrderedAggStreamReader, available_now: bool = True,
                limit: Any = None) -> list[list[dict[str, Any]]]:
    """Run micro-batches until the offset stops moving; rows per batch in output order."""
    if available_now:
        reader.prepareForTriggerAvailableNow()
    start, batches = reader.initialOffset(), []
    while True:
        end = reader.latestOffset(start, limit or reader.getDefaultReadLimit())
        if end == start:
            return batches
        rows = [r for p in reader.partitions(start, end) for b in reader.read(p)
                for r in b.to_pylist()]
        batches.append(sorted(rows, key=output_key))
        reader.commit(end)
        start = end


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_one_batch_matches_the_oracle(tmp_path, fmt: str) -> None:
    tables = write_inputs(str(tmp_path / "in"), fmt=fmt)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                                        format=fmt))
    batches = run_batches(reader, limit=ReadAllAvailable())
    assert len(batches) == 1
    assert_matches_oracle(batches[0], expected_rows(tables))


@pytest.mark.parametrize(("limit", "rows"), [(1, 12), (7, 150), (64, 150), (250, 150), (999, 150)])
def test_any_admission_limit_gives_identical_output(tmp_path, limit: int, rows: int) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=rows)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=limit, partitionGroups=5, numPartitions=3)
    batches = run_batches(make_reader(opts))
    total_rows = sum(t.num_rows for t in tables)
    assert len(batches) >= -(-total_rows // limit)
    flat = [r for b in batches for r in b]
    reference = run_batches(make_reader(source_options(
        str(tmp_path / "in"), 3, str(tmp_path / "ref-state"), maxRecordsPerTrigger=0)))
    assert flat == [r for b in reference for r in b]  # bit-identical, floats included
    assert_matches_oracle(flat, expected_rows(tables))


def test_read_limit_admits_the_earliest_rows_of_all_inputs(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=100)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"),
                                        maxRecordsPerTrigger=30))
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    start = reader.initialOffset()
    for limit in (30, 4, 1):
        end = parse_offset(reader.latestOffset(start, ReadMaxRows(limit)), 3)
        taken = [c.seq for c in end.cursors]
        assert sum(taken) == limit
        pairs = list(zip(tables, taken, strict=True))
        admitted = max(int(t.column("ts")[n - 1].as_py()) for t, n in pairs if n)
        waiting = min(int(t.column("ts")[n].as_py()) for t, n in pairs)
        assert admitted <= waiting  # no row left behind is earlier than an admitted one
    everything = parse_offset(reader.latestOffset(start, ReadAllAvailable()), 3)
    assert [c.seq for c in everything.cursors] == [t.num_rows for t in tables]


def test_replayed_batch_reads_the_same_state_and_rows(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), maxRecordsPerTrigger=150,
                          endOfInput="never")
    reader = make_reader(opts)
    start = reader.initialOffset()
    mid = reader.latestOffset(start, reader.getDefaultReadLimit())
    for p in reader.partitions(start, mid):
        list(reader.read(p))
    end = reader.latestOffset(mid, reader.getDefaultReadLimit())
    first = [b.to_pylist() for p in reader.partitions(mid, end) for b in reader.read(p)]
    again = [b.to_pylist() for p in reader.partitions(mid, end) for b in reader.read(p)]
    assert first == again
    assert any(first)


def test_empty_batch_has_no_partitions(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=20)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s")))
    start = reader.initialOffset()
    assert reader.partitions(start, start) == []


def test_open_windows_wait_without_end_of_input(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), endOfInput="never")
    reader = make_reader(opts)
    rows = [r for b in run_batches(reader, available_now=False) for r in b]
    expected = expected_rows(tables)
    bound = min(int(t.column("ts")[-1].as_py()) for t in tables)
    closed = [r for r in expected if r["window_end"] <= bound]
    assert 0 < len(rows) == len(closed) < len(expected)
    assert_matches_oracle(rows, closed)


def test_missing_state_version_is_a_clear_error(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=100)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), maxRecordsPerTrigger=100)
    reader = make_reader(opts)
    start = reader.initialOffset()
    mid = reader.latestOffset(start, reader.getDefaultReadLimit())
    for p in reader.partitions(start, mid):
        list(reader.read(p))
    directory = version_dir(str(tmp_path / "s"), version_id(parse_offset(mid, 3)))
    (group_file,) = [n for n in os.listdir(directory) if n.startswith("group-0000.")]
    os.unlink(os.path.join(directory, group_file))
    end = reader.latestOffset(mid, reader.getDefaultReadLimit())
    partitions = reader.partitions(mid, end)
    with pytest.raises(StateError, match=r"state of partition group 0 is missing: .*"
                                         + re.escape(group_file)):
        list(reader.read(partitions[0]))


def test_commit_prunes_old_versions(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=100)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), maxRecordsPerTrigger=20,
                          partitionGroups=2)
    batches = run_batches(make_reader(opts))
    assert len(batches) > 5
    versions = os.listdir(os.path.join(str(tmp_path / "s"), "versions"))
    assert len(versions) == KEEP_OLDER_VERSIONS + 1


def write_out_of_order_inputs(root: Any) -> None:
    """Inputs ``root/in0`` (in order) and ``root/in1`` (row 2 out of order), one file each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for j, ts in enumerate(([1, 2, 3], [10, 20, 15, 30])):
        os.makedirs(root / f"in{j}")
        table = pa.table({"ts": pa.array(ts, pa.int64()), "meter": ["a"] * len(ts),
                          "value": [1.0] * len(ts), "kind": ["ok"] * len(ts)})
        pq.write_table(table, root / f"in{j}" / "p.parquet")


def test_out_of_order_input_fails_on_the_driver_naming_input_and_position(tmp_path) -> None:
    write_out_of_order_inputs(tmp_path)
    reader = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "s"),
                                        splitRows="driver"))
    with pytest.raises(OutOfOrderError) as caught:
        reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
    assert str(caught.value).splitlines()[0] == (
        f"input 1 ({tmp_path / 'in1'}) is out of order in file "
        f"{str(tmp_path / 'in1' / 'p.parquet')!r} at row 2 (0-based; position 2 of the "
        f"input): ts 15 is lower than the previous ts 20 of the same input; sort the input by "
        f"event time, or set outOfOrder=drop to drop such rows")
    dropping = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "s2"),
                                          outOfOrder="drop"))
    rows = [r for b in run_batches(dropping) for r in b]
    assert sum(r["n"] for r in rows) == 2 * 6  # 6 rows kept, each in 2 sliding windows


@pytest.mark.parametrize("split_rows", ["driver", "tasks"])
def test_a_dropped_out_of_order_row_is_logged_once_per_batch(
        tmp_path, caplog: pytest.LogCaptureFixture, split_rows: str) -> None:
    # with splitRows=tasks the driver reads no row and every task reads the whole batch:
    # one task logs the drop (before, none did)
    write_out_of_order_inputs(tmp_path)
    reader = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "s"),
                                        outOfOrder="drop", splitRows=split_rows,
                                        numPartitions="3"))
    with caplog.at_level(logging.WARNING):
        start = reader.initialOffset()
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        parts = reader.partitions(start, end)
        [b for part in parts for b in reader.read(part)]  # noqa: B018 - read them all
    assert len(parts) == 3
    assert [r.getMessage() for r in caplog.records if "out-of-order" in r.getMessage()] == [
        "input 1: dropped 1 out-of-order rows among positions 0..3 (outOfOrder=drop)"]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limits=st.lists(st.integers(1, 400), min_size=1, max_size=6),
       groups=st.integers(1, 9), tasks=st.integers(1, 4))
def test_any_sequence_of_limits_groups_and_tasks_matches_the_oracle(
        tmp_path_factory, limits: list[int], groups: int, tasks: int) -> None:
    root = tmp_path_factory.mktemp("prop")
    tables = write_inputs(str(root / "in"), rows=120, seed=5)
    opts = source_options(str(root / "in"), 3, str(root / "s"), partitionGroups=groups,
                          numPartitions=tasks)
    reader = make_reader(opts)
    reader.prepareForTriggerAvailableNow()
    start, rows, i = reader.initialOffset(), [], 0
    while True:  # the limit changes from batch to batch, cycling through ``limits``
        end = reader.latestOffset(start, ReadMaxRows(limits[i % len(limits)]))
        if end == start:
            break
        batch = [r for p in reader.partitions(start, end) for b in reader.read(p)
                 for r in b.to_pylist()]
        rows += sorted(batch, key=output_key)
        reader.commit(end)
        start, i = end, i + 1
    one_batch = run_batches(make_reader(opts | {"stateLocation": str(root / "s1"),
                                                "maxRecordsPerTrigger": "0"}))
    assert rows == [r for b in one_batch for r in b]  # bit-identical, floats included
    assert_matches_oracle(rows, expected_rows(tables))


def test_exhausted_inputs_flush_the_last_windows_with_any_trigger(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=80)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), endOfInput="exhausted",
                          maxRecordsPerTrigger=50)
    rows = [r for b in run_batches(make_reader(opts), available_now=False) for r in b]
    assert_matches_oracle(rows, expected_rows(tables))


def test_glob_inputs(tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=2, rows=60)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "s"))
    opts["inputs"] = ",".join(str(tmp_path / "in" / f"in{j}" / "part-*.parquet") for j in range(2))
    rows = [r for b in run_batches(make_reader(opts)) for r in b]
    assert_matches_oracle(rows, expected_rows(tables))
