"""File-backed inputs: listing, reads between cursors, fair admission (pure: no JVM)."""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched import inputs
from spark_stream_sched.errors import InputError, OutOfOrderError
from spark_stream_sched.inputs import Cursor, InputStream

from .datagen import make_stream, write_stream


def test_time_aligned_shares_admit_the_earliest_rows() -> None:
    heads = [np.array([1, 2, 3, 9]), np.array([2, 2, 2, 2]), np.array([5, 6])]
    assert inputs.time_aligned_shares(heads, [None] * 3, 4) == [2, 2, 0]  # ties at 2: low ids
    assert inputs.time_aligned_shares(heads, [None] * 3, 7) == [3, 4, 0]
    assert inputs.time_aligned_shares(heads, [None] * 3, 8) == [3, 4, 1]
    assert inputs.time_aligned_shares(heads, [None] * 3, None) == [4, 4, 2]
    assert inputs.time_aligned_shares(heads, [None] * 3, 100) == [4, 4, 2]
    # an out-of-order row ranks at the time its input has reached (running maximum)
    assert inputs.time_aligned_shares([np.array([5, 1, 6]), np.array([3, 4])],
                                      [None, None], 2) == [0, 2]
    assert inputs.time_aligned_shares([np.array([1]), np.array([])], [7, None], 1) == [1, 0]


def test_listing_skips_hidden_files_and_sorts_by_name(tmp_path) -> None:
    for name in ("b.parquet", "a.parquet", "_SUCCESS", ".a.parquet.crc"):
        (tmp_path / name).write_bytes(b"")
    assert inputs.list_files(str(tmp_path)) == [str(tmp_path / "a.parquet"),
                                                 str(tmp_path / "b.parquet")]
    assert inputs.list_files(str(tmp_path / "*.parquet")) == inputs.list_files(str(tmp_path))
    assert inputs.list_files(str(tmp_path / "b.parquet")) == [str(tmp_path / "b.parquet")]
    assert inputs.list_files(str(tmp_path / "*.csv")) == []  # a glob may match nothing yet
    with pytest.raises(InputError, match="neither a directory, a file nor a glob"):
        inputs.list_files(str(tmp_path / "missing"))


def test_a_glob_skips_hidden_components_below_its_root(tmp_path) -> None:
    """A writer's ``_temporary/`` copy is not read twice (Spark skips any ``_``/``.`` part)."""
    for rel in ("a/part-0", "b/part-0", "_temporary/part-0", "a/_tmp/part-1", ".x/part-0",
                "b/.part-0.crc", "_temporary/0/part-0", "c/0/part-0"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    expected = [str(tmp_path / "a/part-0"), str(tmp_path / "b/part-0")]
    assert inputs.list_files(str(tmp_path / "*" / "part-*")) == expected
    assert inputs.list_files(str(tmp_path / "*" / "*" / "part-*")) == [
        str(tmp_path / "c/0/part-0")]
    assert inputs.list_files(str(tmp_path / "_temporary" / "*" / "part-*")) == [
        str(tmp_path / "_temporary/0/part-0")]  # the root itself is the user's choice


@pytest.mark.parametrize("name", ["meter[1]", "meter*", "meter?"])
def test_an_existing_path_with_glob_characters_is_literal(tmp_path, name: str) -> None:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "part-0").write_bytes(b"")
    assert inputs.list_files(str(directory)) == [str(directory / "part-0")]
    assert inputs.list_files(str(directory / "part-*")) == [str(directory / "part-0")]
    assert inputs.list_files(str(directory / "part-0")) == [str(directory / "part-0")]


def test_a_glob_that_matches_nothing_fails_where_the_input_is_finished(tmp_path) -> None:
    pattern = str(tmp_path / "meter[1]" / "*.parquet")
    assert inputs.list_files(pattern) == []  # a streaming input may still receive files
    with pytest.raises(InputError, match=r"^input glob '.*' matches no file, and the input is "
                                         r"read once"):
        inputs.list_finished_files(pattern)
    assert inputs.list_finished_files(str(tmp_path)) == []  # an existing directory may be empty


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_advance_and_read_between_cover_every_row_once(tmp_path, fmt: str) -> None:
    table = make_stream(3, 0, 230)
    write_stream(table, str(tmp_path), 4, fmt=fmt, row_group_size=17)
    schema = table.schema
    stream = InputStream(0, str(tmp_path), fmt, schema)
    files = inputs.list_files(str(tmp_path))
    cursor, parts = Cursor(), []
    for step in (1, 56, 0, 57, 100, 16):
        end = inputs.advance(stream, files, cursor, step, "ts", "fail", False)
        rows, ts, seq = inputs.read_between(stream, files, cursor, end, "ts", "fail")
        assert rows.num_rows == step
        assert list(seq) == list(range(cursor.seq, end.seq))
        assert end.last_ts == (int(ts[-1]) if step else cursor.last_ts)
        parts.append(rows)
        cursor = end
    assert cursor.seq == 230
    assert inputs.available_rows(files, cursor, fmt, None) == 0
    assert pa.concat_tables(parts).equals(table)


def test_new_files_after_the_cursor_are_picked_up(tmp_path) -> None:
    table = make_stream(4, 0, 60)
    pq.write_table(table.slice(0, 30), tmp_path / "p-0.parquet")
    stream = InputStream(0, str(tmp_path), "parquet", table.schema)
    end = inputs.advance(stream, inputs.list_files(str(tmp_path)), Cursor(), 30, "ts", "fail",
                         False)
    assert inputs.available_rows(inputs.list_files(str(tmp_path)), end, "parquet", None) == 0
    pq.write_table(table.slice(30), tmp_path / "p-1.parquet")
    files = inputs.list_files(str(tmp_path))
    assert inputs.available_rows(files, end, "parquet", None) == 30
    later = inputs.advance(stream, files, end, 30, "ts", "fail", True)
    assert later.finished
    assert later.file == str(tmp_path / "p-1.parquet")
    assert later.row == 30
    rows, _, _ = inputs.read_between(stream, files, end, later, "ts", "fail")
    assert rows.equals(table.slice(30))


def test_exhausted_input_finishes_and_never_moves_again(tmp_path) -> None:
    stream = InputStream(0, str(tmp_path), "parquet", None)
    done = inputs.advance(stream, [], Cursor(), 0, "ts", "fail", True)
    assert done.finished
    assert inputs.advance(stream, [], done, 0, "ts", "fail", True) is done


def two_files(directory, first: list[int], second: list[int]) -> list[str]:
    """An input of two Parquet files holding the event times ``first`` and ``second``."""
    for name, ts in (("a.parquet", first), ("b.parquet", second)):
        pq.write_table(pa.table({"ts": pa.array(ts, pa.int64())}), directory / name)
    return inputs.list_files(str(directory))


def test_out_of_order_fail_names_input_directory_file_row_and_both_ts(tmp_path) -> None:
    files = two_files(tmp_path, [1, 5], [6, 3, 7])
    stream = InputStream(2, str(tmp_path), "parquet", pa.schema([("ts", pa.int64())]))
    with pytest.raises(OutOfOrderError) as caught:
        inputs.advance(stream, files, Cursor(), 5, "ts", "fail", False)
    assert str(caught.value) == (
        f"input 2 ({tmp_path}) is out of order in file {files[1]!r} at row 1 (0-based; "
        f"position 3 of the input): ts 3 is lower than the previous ts 6 of the same input; "
        f"sort the input by event time, or set outOfOrder=drop to drop such rows")


def test_rows_read_from_a_cursor_name_the_row_within_its_file(tmp_path) -> None:
    """The executor's read starts at the batch's cursor: rows count from there, not from 0."""
    files = two_files(tmp_path, [1, 2, 3], [4, 6, 5, 7])
    stream = InputStream(0, str(tmp_path), "parquet", pa.schema([("ts", pa.int64())]))
    start, end = Cursor(files[0], 3, 3, 3), Cursor(files[1], 4, 7, 7)
    with pytest.raises(OutOfOrderError, match=rf"in file {re.escape(repr(files[1]))} at row 2 "
                                              rf"\(0-based; position 5 of the input\): ts 5"):
        inputs.read_between(stream, files, start, end, "ts", "fail")


def test_out_of_order_drop_keeps_seq_of_dropped_rows(tmp_path) -> None:
    table = pa.table({"ts": pa.array([1, 5, 3, 7], pa.int64())})
    pq.write_table(table, tmp_path / "a.parquet")
    stream = InputStream(0, str(tmp_path), "parquet", table.schema)
    files = inputs.list_files(str(tmp_path))
    mid = inputs.advance(stream, files, Cursor(), 2, "ts", "drop", False)
    end = inputs.advance(stream, files, mid, 2, "ts", "drop", False)
    assert (mid.last_ts, end.last_ts) == (5, 7)
    rows, ts, seq = inputs.read_between(stream, files, mid, end, "ts", "drop")
    assert list(ts) == [7]
    assert list(seq) == [3]


def test_removed_file_is_a_clear_error(tmp_path) -> None:
    table = make_stream(5, 0, 20)
    write_stream(table, str(tmp_path), 2)
    stream = InputStream(0, str(tmp_path), "parquet", table.schema)
    cursor = inputs.advance(stream, inputs.list_files(str(tmp_path)), Cursor(), 5, "ts", "fail",
                            False)
    os.unlink(cursor.file)
    with pytest.raises(InputError, match="no longer listed"):
        inputs.available_rows(inputs.list_files(str(tmp_path)), cursor, "parquet", None)


def test_timestamp_event_time_is_read_as_milliseconds(tmp_path) -> None:
    table = make_stream(6, 0, 40, ts_type="timestamp")
    write_stream(table, str(tmp_path), 1)
    stream = InputStream(0, str(tmp_path), "parquet", table.schema)
    end = inputs.advance(stream, inputs.list_files(str(tmp_path)), Cursor(), 40, "ts", "fail",
                         False)
    expected = int(np.asarray(table.column("ts").cast(pa.int64()))[-1] // 1000)
    assert end.last_ts == expected
