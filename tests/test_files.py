"""Input streams survive a round trip through Parquet, CSV and JSON-lines directories.

All through the one input layer, :mod:`spark_stream_sched.inputs`.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.data.soundcloud import soundcloud_streams
from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.inputs import FORMATS, read_input, write_input, write_inputs

ALL_FORMATS = list(FORMATS)


def _tricky_strings() -> pa.Table:
    texts = ['say "hi", ok', "back\\slash", "new\nline\ttab", "naïve ☃ café", "", "a,b;c"]
    return pa.table({"ts": pa.array(range(len(texts)), pa.int64()), "text": texts})


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_smart_grid_round_trip(tmp_path: Path, fmt: str) -> None:
    table = smart_grid_streams(1, rows=3_000, null_rate=0.2, string_meter_ids=True, seed=1)[0]
    files = write_input(table, tmp_path / "in", fmt, n_files=4)
    assert [f.name for f in files] == [f"part-{i:05d}{FORMATS[fmt].suffix}" for i in range(4)]
    assert read_input(tmp_path / "in", fmt, schema=table.schema).equals(table)
    inferred = read_input(tmp_path / "in", fmt)
    assert inferred.column_names == table.column_names
    assert inferred.cast(table.schema).equals(table)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_comments_and_tricky_strings_round_trip(tmp_path: Path, fmt: str) -> None:
    comments = soundcloud_streams(1, 2_000, seed=2)[0]
    write_input(comments, tmp_path / "c", fmt, n_files=3)
    assert read_input(tmp_path / "c", fmt, schema=comments.schema).equals(comments)
    tricky = _tricky_strings()
    write_input(tricky, tmp_path / "t", fmt, n_files=2)
    assert read_input(tmp_path / "t", fmt, schema=tricky.schema).equals(tricky)


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_name_order_is_stream_order_and_single_files_read(tmp_path: Path, fmt: str) -> None:
    table = pa.table({"ts": pa.array(range(10), pa.int64()), "v": [float(i) for i in range(10)]})
    files = write_input(table, tmp_path, fmt, n_files=3)
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".part-00000.crc").write_text("junk")
    whole = read_input(tmp_path, fmt, schema=table.schema)
    assert whole.column("ts").to_pylist() == list(range(10))
    first = read_input(files[0], fmt, schema=table.schema)
    assert first.column("ts").to_pylist() == list(range(first.num_rows))
    assert 0 < first.num_rows < 10


def test_more_files_than_rows_and_write_inputs(tmp_path: Path) -> None:
    tables = smart_grid_streams(3, 5, rows=4, seed=3)
    for fmt in ALL_FORMATS:
        dirs = write_inputs(tables, tmp_path / fmt, fmt, n_files=3)
        assert [d.name for d in dirs] == ["input-000", "input-001", "input-002"]
        for table, directory in zip(tables, dirs, strict=True):
            assert read_input(directory, fmt, schema=table.schema).equals(table)


@pytest.mark.parametrize(("fmt", "content"), [
    ("parquet", b"PAR1 this is not parquet"),
    ("csv", b"ts,value\n1,2.0\n2,3.0,99\n"),
    ("jsonl", b'{"ts": 1, "value": 2.0}\n{"ts": 2, "value": \n'),
])
def test_malformed_file_names_the_file(tmp_path: Path, fmt: str, content: bytes) -> None:
    good = pa.table({"ts": pa.array([0], pa.int64()), "value": [1.0]})
    write_input(good, tmp_path, fmt)
    bad = tmp_path / f"part-00001{FORMATS[fmt].suffix}"
    bad.write_bytes(content)
    with pytest.raises(InputError, match="part-00001"):
        read_input(tmp_path, fmt)


def test_mismatched_schemas_name_the_file(tmp_path: Path) -> None:
    write_input(pa.table({"ts": pa.array([0], pa.int64())}), tmp_path / "a", "parquet")
    (tmp_path / "a" / "part-00000.parquet").rename(tmp_path / "a" / "part-00009.parquet")
    write_input(pa.table({"ts": ["x"]}), tmp_path / "a", "parquet")
    with pytest.raises(InputError) as info:
        read_input(tmp_path / "a", "parquet")
    # one line, the reason and the fix first (pyarrow's schema has a line per field)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(
        f"file {str(tmp_path / 'a' / 'part-00009.parquet')!r}: column 'ts' holds int64 values "
        f"where the input schema has string; the input schema is option schema, else the one "
        f"recorded in stateLocation at the first start, else the types of the first file that "
        f"holds a row: declare the schema (option schema")


def test_missing_or_extra_columns_name_the_file(tmp_path: Path) -> None:
    write_input(pa.table({"ts": [1], "v": [1.0]}), tmp_path / "a", "csv")
    (tmp_path / "a" / "part-00001.csv").write_text("ts\n2\n")
    with pytest.raises(InputError, match="part-00001.csv"):
        read_input(tmp_path / "a", "csv")
    (tmp_path / "a" / "part-00001.csv").write_text("v,ts\n2.5,2\n")
    # part-00000 holds v = 1.0 written as "1.0": the first file's schema has v double
    assert (tmp_path / "a" / "part-00000.csv").read_text().splitlines()[1] == '1,"1.0"'
    assert read_input(tmp_path / "a", "csv").to_pydict() == {"ts": [1, 2], "v": [1.0, 2.5]}
    (tmp_path / "a" / "part-00001.csv").write_text("v,ts\nabc,2\n")
    with pytest.raises(InputError, match="part-00001.csv"):
        read_input(tmp_path / "a", "csv")


def test_the_first_file_with_a_row_decides_the_schema(tmp_path: Path) -> None:
    """One rule for the CLI and the source: later files are parsed as the first one's types."""
    (tmp_path / "part-0.csv").write_text("ts,v\n")  # header only: no row, no types
    (tmp_path / "part-1.csv").write_text("ts,v\n1,1\n")  # v infers int64 here ...
    (tmp_path / "part-2.csv").write_text("ts,v\n2,2.5\n")  # ... so 2.5 does not fit
    with pytest.raises(InputError, match=r"part-2\.csv"):
        read_input(tmp_path, "csv")
    schema = pa.schema([("ts", pa.int64()), ("v", pa.float64())])
    assert read_input(tmp_path, "csv", schema=schema).to_pydict() == {"ts": [1, 2],
                                                                      "v": [1.0, 2.5]}


def test_missing_and_empty_inputs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither a directory, a file nor a glob"):
        read_input(tmp_path / "nope", "csv")
    (tmp_path / "x.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match="no input file .* holds a row"):
        read_input(tmp_path, "csv")
    assert read_input(tmp_path, "csv", schema=pa.schema([("ts", pa.int64())])).num_rows == 0
    with pytest.raises(ConfigError, match="'avro' is not an input format"):
        read_input(tmp_path, "avro")
    with pytest.raises(ConfigError):
        write_input(pa.table({"ts": [1]}), tmp_path, "parquet", n_files=0)


def test_jsonl_refuses_nan(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="NaN"):
        write_input(pa.table({"v": [1.0, float("nan")]}), tmp_path, "jsonl")


def test_csv_nan_is_not_a_number_as_in_spark(tmp_path: Path) -> None:
    """Spark's CSV reader takes ``NaN`` (its ``nanValue``) for not-a-number, not for null."""
    (tmp_path / "part-0.csv").write_text("ts,v\n1,1.5\n2,NaN\n3,\n4,Infinity\n5,nan\n")
    values = read_input(tmp_path, "csv").column("v").to_pylist()
    # Spark: "" is null, and "nan" does not parse as a double (null in its default mode)
    assert [repr(v) for v in values] == ["1.5", "nan", "None", "inf", "None"]
    table = pa.table({"ts": [1, 2, 3, 4], "v": [math.nan, math.inf, -math.inf, None]})
    write_input(table, tmp_path / "out", "csv")
    back = read_input(tmp_path / "out", "csv").column("v").to_pylist()
    assert [repr(v) for v in back] == ["nan", "inf", "-inf", "None"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_later_value_of_another_type_says_to_declare_the_schema(tmp_path: Path,
                                                                   fmt: str) -> None:
    """Whole numbers in the first file type the column int64; a later 2.5 does not fit it."""
    first = {"csv": "ts,v\n1,1\n", "jsonl": '{"ts": 1, "v": 1}\n'}[fmt]
    later = {"csv": "ts,v\n2,2.5\n", "jsonl": '{"ts": 2, "v": 2.5}\n'}[fmt]
    (tmp_path / f"part-0.{fmt}").write_text(first)
    (tmp_path / f"part-1.{fmt}").write_text(later)
    with pytest.raises(InputError, match=rf"^file '.*part-1\.{fmt}': column 'v' holds double "
                                         rf"values where the input schema has int64; .*declare "
                                         rf"the schema \(option schema, e\.g\. 'v double, "):
        read_input(tmp_path, fmt)


def test_a_parquet_column_of_another_kind_names_the_column_and_both_types(
        tmp_path: Path) -> None:
    write_input(pa.table({"ts": [1], "v": [1]}), tmp_path / "a", "parquet")
    (tmp_path / "a" / "part-00000.parquet").rename(tmp_path / "a" / "part-0.parquet")
    write_input(pa.table({"ts": [2], "v": [2.5]}), tmp_path / "a", "parquet")
    with pytest.raises(InputError) as caught:
        read_input(tmp_path / "a", "parquet")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"file '{tmp_path / 'a' / 'part-00000.parquet'}': column 'v' "
                              f"holds double values where the input schema has int64; ")
