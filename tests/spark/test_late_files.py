"""Replays read what they planned; late-sorting files are reported.

The reader is driven directly, as Spark's source runner would (no JVM). A "crash" is a new
reader on the same ``stateLocation`` after batch 1 was planned (its end offset returned, as
Spark logs it) but not read; a file that sorts inside batch 1's range appears in between.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import InputError
from spark_stream_sched.inputs.manifest import manifest_path, read_manifest
from spark_stream_sched.inputs.offsets import parse_offset
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader

from .helpers import output_key, source_options, write_inputs

LIMIT = ReadMaxRows(100)


def make_reader(opts: dict[str, str]) -> OrderedAggStreamReader:
    source = OrderedAggDataSource(opts)
    return source.streamReader(source.schema())


def read_batch(reader: OrderedAggStreamReader, start: Any, end: Any) -> list[dict[str, Any]]:
    rows = [r for p in reader.partitions(start, end) for b in reader.read(p)
            for r in b.to_pylist()]
    reader.commit(end)
    return sorted(rows, key=output_key)


def run_to_end(reader: OrderedAggStreamReader, start: Any) -> list[list[dict[str, Any]]]:
    batches = []
    while (end := reader.latestOffset(start, LIMIT)) != start:
        batches.append(read_batch(reader, start, end))
        start = end
    return batches


def add_file_inside(path: str, cursor_file: str) -> str:
    """A file sorting just before ``cursor_file``: the rows of that file, other values."""
    table = pq.read_table(cursor_file)
    table = table.set_column(table.schema.get_field_index("value"), "value",
                             pc.add(table.column("value"), 1000.0))
    late = os.path.join(path, os.path.basename(cursor_file).replace(".parquet", "-a.parquet"))
    late = late.replace("part-00001-a", "part-00000a")  # sorts between part-00000 and -00001
    pq.write_table(table, late)
    return late


def crashed_after_planning_batch_1(tmp_path, **extra: str) -> tuple[dict[str, str], Any, Any,
                                                                    list[list[dict]]]:
    """Run batch 0, plan batch 1, "crash"; return options, both offsets and the clean run."""
    write_inputs(str(tmp_path / "in"), n_inputs=3, rows=150)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=100, **extra)
    clean_reader = make_reader(opts | {"stateLocation": str(tmp_path / "clean")})
    clean_reader.prepareForTriggerAvailableNow()
    clean = run_to_end(clean_reader, clean_reader.initialOffset())
    reader = make_reader(opts)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end0 = reader.latestOffset(start, LIMIT)
    assert read_batch(reader, start, end0) == clean[0]
    end1 = reader.latestOffset(end0, LIMIT)  # Spark logs offsets/1, then the driver dies
    reader.stop()
    return opts, end0, end1, clean


@pytest.mark.parametrize("late_files", ["fail", "skip"])
def test_a_replayed_batch_reads_the_files_it_planned(tmp_path, late_files: str) -> None:
    # the driver admits rows (splitRows=tasks: whole row groups, here whole files), so the
    # replayed batch ends inside input 0's second file
    opts, end0, end1, clean = crashed_after_planning_batch_1(tmp_path, lateFiles=late_files,
                                                             splitRows="driver")
    cursor = parse_offset(end1, 3).cursors[0]
    assert parse_offset(end0, 3).cursors[0].file < cursor.file  # the batch spans two files
    late = add_file_inside(str(tmp_path / "in" / "in0"), cursor.file)
    restarted = make_reader(opts)
    restarted.prepareForTriggerAvailableNow()
    assert read_batch(restarted, end0, end1) == clean[1]  # the replay: same rows, no swap
    if late_files == "fail":
        with pytest.raises(InputError, match=rf"input 0 .*file '{late}' appeared after"):
            restarted.latestOffset(end1, LIMIT)
        return
    assert [clean[0], clean[1], *run_to_end(restarted, end1)] == clean
    entries, _ = read_manifest(manifest_path(opts["stateLocation"], 0))
    assert [e.file for e in entries if e.skipped] == [late]


def test_a_late_file_is_reported_while_the_query_runs(tmp_path) -> None:
    """Without a crash: a file sorting before admitted ones fails the next planning step."""
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=100)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"),
                          maxRecordsPerTrigger=60, endOfInput="never")
    reader = make_reader(opts)
    start = reader.initialOffset()
    end = reader.latestOffset(start, LIMIT)
    read_batch(reader, start, end)
    early = str(tmp_path / "in" / "in1" / "part-00000-early.parquet")
    pq.write_table(pa.table({"ts": pa.array([1], pa.int64())}), early)
    with pytest.raises(InputError, match=r"input 1 .*lateFiles=skip"):
        reader.latestOffset(end, LIMIT)


def first_batch(tmp_path: Any) -> tuple[list[pa.Table], Any, Any]:
    """Two inputs of 100 rows, a reader, and the end offset of its first batch (60 rows)."""
    tables = write_inputs(str(tmp_path / "in"), n_inputs=2, rows=100)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"),
                          maxRecordsPerTrigger=60, endOfInput="never")
    reader = make_reader(opts)
    return tables, reader, reader.latestOffset(reader.initialOffset(), LIMIT)


def test_a_changed_file_a_batch_read_from_is_refused(tmp_path) -> None:
    tables, reader, end = first_batch(tmp_path)
    entered = parse_offset(end, 2).cursors[1].file  # the batch ending at ``end`` reads it
    pq.write_table(pa.concat_tables([tables[1], tables[1]]), entered)  # rewritten in place
    with pytest.raises(InputError, match=rf"file '{entered}' was \d+ bytes .* must not change"):
        reader.latestOffset(end, LIMIT)


def test_a_file_no_batch_read_from_yet_is_taken_as_it_is_now(tmp_path) -> None:
    """No logged offset reaches into it, so no batch reads it as it was: nothing to refuse."""
    tables, reader, end = first_batch(tmp_path)
    last = str(tmp_path / "in" / "in1" / "part-00002.parquet")
    assert parse_offset(end, 2).cursors[1].file < last
    before = pq.read_table(last)
    pq.write_table(before.slice(before.num_rows - 5), last)  # replaced: its last 5 rows
    end = reader.latestOffset(end, ReadMaxRows(10_000))
    assert parse_offset(end, 2).cursors[1].seq == tables[1].num_rows - before.num_rows + 5
