"""Consumed input files may be deleted between ``Trigger.AvailableNow`` runs of the source.

Each input's cursor stays in the last file it read, and Spark commits a run's last batch only in
the next run, so the next run asked that file for its rows first: deleting the consumed files
stopped it ("input file ... has disappeared"). A file a cursor read to the end is needed by no
batch Spark can still plan (``inputs/consumed.py``); one with rows left to read, or one that
grew after it was read, is still an error naming it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import InputError
from spark_stream_sched.spark import register

from .datagen import make_stream
from .helpers import flatten, run_available_now, source_options, start_query
from .test_retention import stream_reader

N_INPUTS, ROWS, LIMIT = 2, 400, 150


def write_files(table: pa.Table, directory: Path, first: int, n_files: int) -> list[Path]:
    """``table`` as ``n_files`` Parquet files named ``part-<first + i>`` (stream order)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_files):
        lo, hi = table.num_rows * i // n_files, table.num_rows * (i + 1) // n_files
        paths.append(directory / f"part-{first + i:05d}.parquet")
        pq.write_table(table.slice(lo, hi - lo), paths[-1])
    return paths


def streams() -> list[pa.Table]:
    return [make_stream(3, j, ROWS) for j in range(N_INPUTS)]


def opts_for(root: Path) -> dict[str, str]:
    return source_options(str(root), N_INPUTS, str(root / "state"), endOfInput="never")


def one_run(reader: Any, start: dict[str, Any] | None = None
            ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """A ``Trigger.AvailableNow`` run in Spark's order: each batch's end is committed after the
    next ``latestOffset``, so the run's last batch is not. Returns the rows and batches."""
    reader.prepareForTriggerAvailableNow()
    previous = start
    start = reader.initialOffset() if start is None else start
    rows: list[dict[str, Any]] = []
    batches = []
    while True:
        end = reader.latestOffset(start, ReadMaxRows(LIMIT))
        if end == start:
            return rows, batches
        if previous is not None:
            reader.commit(previous)
        rows += [r for p in reader.partitions(start, end) for b in reader.read(p)
                 for r in b.to_pylist()]
        batches.append((start, end))
        previous = start = end


def two_runs(root: Path, delete: bool) -> tuple[list[dict[str, Any]], Any]:
    """Half of each stream, a run, (deleting every file read,) the other half, a second run."""
    tables = streams()
    for j, table in enumerate(tables):
        write_files(table.slice(0, ROWS // 2), root / f"in{j}", 0, 2)
    first, batches = one_run(stream_reader(opts_for(root)))
    for j, table in enumerate(tables):
        if delete:
            shutil.rmtree(root / f"in{j}")
        write_files(table.slice(ROWS // 2), root / f"in{j}", 10, 2)
    second, more = one_run(stream_reader(opts_for(root)), batches[-1][1])
    return first + second, more


def test_the_next_run_goes_on_after_the_consumed_files_are_deleted(tmp_path: Path) -> None:
    rows, batches = two_runs(tmp_path / "deleted", delete=True)
    control, _ = two_runs(tmp_path / "kept", delete=False)
    assert rows == control
    assert sum(c["seq"] for c in batches[-1][1]["inputs"]) == N_INPUTS * ROWS
    assert len(batches) > 1
    assert rows


def test_a_deleted_file_with_rows_left_to_read_is_still_an_error(tmp_path: Path) -> None:
    for j, table in enumerate(streams()):
        write_files(table, tmp_path / f"in{j}", 0, 2)
    reader = stream_reader(opts_for(tmp_path))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(LIMIT))  # into each input's first file
    for part in reader.partitions(start, end):
        list(reader.read(part))
    cursor_file = end["inputs"][0]["file"]
    os.unlink(cursor_file)
    again = stream_reader(opts_for(tmp_path))
    again.prepareForTriggerAvailableNow()
    with pytest.raises(InputError, match=rf"input file '{cursor_file}' has disappeared"):
        again.latestOffset(end, ReadMaxRows(LIMIT))


def test_a_file_read_to_the_end_that_grew_is_still_an_error(tmp_path: Path) -> None:
    tables = streams()
    for j, table in enumerate(tables):
        write_files(table.slice(0, ROWS // 2), tmp_path / f"in{j}", 0, 2)
    _, batches = one_run(stream_reader(opts_for(tmp_path)))
    last = Path(batches[-1][1]["inputs"][0]["file"])
    pq.write_table(tables[0].slice(ROWS // 4, ROWS // 2), last)  # rows appended in place
    with pytest.raises(InputError, match=rf"input 0 file '{last}' was \d+ bytes when the source "
                                         rf"admitted it and is \d+ bytes now"):
        one_run(stream_reader(opts_for(tmp_path)), batches[-1][1])


@pytest.mark.spark
def test_spark_available_now_runs_with_consumed_files_deleted(spark: Any, tmp_path: Path) -> None:
    """The issue's case on Spark: the second run failed with ``has disappeared``."""
    register(spark)

    def runs(root: Path, delete: bool) -> list[dict[str, Any]]:
        tables = streams()
        for j, table in enumerate(tables):
            write_files(table.slice(0, ROWS // 2), root / f"in{j}", 0, 2)
        opts = {**opts_for(root), "maxRecordsPerTrigger": str(LIMIT)}
        first = run_available_now(spark, opts, str(root / "ck"))
        for j, table in enumerate(tables):
            if delete:
                shutil.rmtree(root / f"in{j}")
            write_files(table.slice(ROWS // 2), root / f"in{j}", 10, 2)
        sink: list[Any] = []
        query = start_query(spark, opts, str(root / "ck"), sink)
        query.awaitTermination(300)
        assert query.exception() is None
        return flatten(first) + flatten(sink)

    rows = runs(tmp_path / "deleted", delete=True)
    assert rows
    assert rows == runs(tmp_path / "kept", delete=False)
