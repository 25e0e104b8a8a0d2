"""The one input layer (:mod:`spark_stream_sched.inputs`): every reader reads what the writer wrote.

The CLI and the jobs read an input as a static snapshot (:func:`~spark_stream_sched.inputs.
read_inputs`); the Spark source walks cursors over the same files (:mod:`spark_stream_sched.
inputs.cursors`). Both must return the same rows for any table, format and file split — empty files
included (a reported defect: the source used to fail with ``Empty JSON file`` where the CLI read 0
rows).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched import inputs
from spark_stream_sched.cli import main
from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.inputs import Cursor, InputStream

FORMATS = ["parquet", "csv", "jsonl", "json"]
SCHEMA = pa.schema([("ts", pa.int64()), ("key", pa.string()), ("value", pa.float64()),
                    ("n", pa.int64())])


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    """Sorted event times, word keys (never a number or a null token), finite floats, ints."""
    size = draw(st.integers(0, 40))
    steps = draw(st.lists(st.integers(0, 5_000), min_size=size, max_size=size))
    ts, now = [], draw(st.integers(0, 2**40))
    for step in steps:
        now += step
        ts.append(now)
    words = st.text("abcxyz", min_size=0, max_size=6).map(lambda w: "k" + w)
    floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
    return pa.table({
        "ts": pa.array(ts, pa.int64()),
        "key": draw(st.lists(words, min_size=size, max_size=size)),
        "value": pa.array(draw(st.lists(st.one_of(st.none(), floats), min_size=size,
                                        max_size=size)), pa.float64()),
        "n": pa.array(draw(st.lists(st.integers(-2**53, 2**53), min_size=size, max_size=size)),
                      pa.int64()),
    }, schema=SCHEMA)


def read_like_the_source(path: str, fmt: str, schema: pa.Schema | None,
                         steps: list[int]) -> pa.Table:
    """Advance a cursor in ``steps`` (then to the end) and read between, as the source does."""
    schema = inputs.resolve_schema([path], fmt, schema)
    stream, files = InputStream(0, path, fmt, schema), inputs.list_files(path)
    cursor, parts = Cursor(), [schema.empty_table()]
    for step in [*steps, inputs.available_rows(files, Cursor(), fmt, None)]:
        step = min(step, inputs.available_rows(files, cursor, fmt, None))
        end = inputs.advance(stream, files, cursor, step, "ts", "fail", True)
        parts.append(inputs.read_between(stream, files, cursor, end, "ts", "fail")[0])
        cursor = end
    assert cursor.finished
    return pa.concat_tables(parts)


def outcome(read: object) -> tuple[str, object]:
    """``("rows", table)`` or ``("error", message)``, so that failures can be compared too."""
    try:
        return "rows", read()  # type: ignore[operator]
    except (InputError, ConfigError) as exc:
        return "error", str(exc)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables(), fmt=st.sampled_from(FORMATS), n_files=st.integers(1, 6),
       steps=st.lists(st.integers(0, 15), max_size=4))
def test_write_then_read_returns_the_rows_and_cli_equals_source(
        tmp_path_factory: pytest.TempPathFactory, table: pa.Table, fmt: str, n_files: int,
        steps: list[int]) -> None:
    directory = str(tmp_path_factory.mktemp("in"))
    inputs.write_input(table, directory, fmt, n_files)
    assert inputs.read_input(directory, fmt, schema=SCHEMA).equals(table)
    assert read_like_the_source(directory, fmt, SCHEMA, steps).equals(table)
    # Without a declared schema both paths infer the same one and read the same rows
    # (or fail with the same message: a column all null in the first file has no type).
    cli = outcome(lambda: inputs.read_inputs([directory], fmt, ts_column="ts")[0])
    source = outcome(lambda: read_like_the_source(directory, fmt, None, steps))
    assert cli[0] == source[0]
    if cli[0] == "rows":
        assert cli[1].equals(source[1])  # type: ignore[attr-defined]
        assert cli[1].cast(SCHEMA).equals(table)  # type: ignore[attr-defined]
    else:  # the CLI's message also names the input; the advice is each one's own
        assert str(source[1]).split("; ")[0] in str(cli[1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_empty_file_holds_zero_rows_in_every_format(tmp_path: Path, fmt: str) -> None:
    """2 rows into 3 files: one file is empty; every reader and counter says 0 rows for it."""
    table = pa.table({"ts": pa.array([1, 2], pa.int64()), "v": [0.5, 1.0]})
    files = inputs.write_input(table, tmp_path, fmt, n_files=3)
    counts = [inputs.count_rows(str(f), fmt) for f in files]
    assert sorted(counts) == [0, 1, 1]
    (tmp_path / "zero-bytes").write_bytes(b"")  # a zero-byte file, whatever the format
    assert inputs.count_rows(str(tmp_path / "zero-bytes"), fmt) == 0
    assert inputs.read_input(tmp_path, fmt).equals(table)
    assert read_like_the_source(str(tmp_path), fmt, None, [1]).equals(table)


def test_json_is_an_alias_of_jsonl_everywhere(tmp_path: Path) -> None:
    assert inputs.canonical_format("JSON") == inputs.canonical_format("jsonl") == "jsonl"
    assert inputs.get_format("json").spark_name == "json"
    with pytest.raises(ConfigError, match="did you mean 'jsonl'"):
        inputs.canonical_format("jsnl", "option format")
    from spark_stream_sched.options.source import parse_options

    opts = {"inputs": str(tmp_path), "window": "1 second", "aggregates": "count(*) as n",
            "stateLocation": str(tmp_path / "s")}
    assert parse_options({**opts, "format": "json"}).format == "jsonl"
    assert parse_options({**opts, "format": "jsonl"}).format == "jsonl"
    from spark_stream_sched.jobs.config import parse_job_config

    query = {"window": "30s", "aggregates": ["count(*) as n"]}
    for name in ("json", "jsonl"):
        job = parse_job_config({"data": {"format": name}, "query": query})
        assert inputs.canonical_format(job.data.format) == "jsonl"
    with pytest.raises(ConfigError, match=r"\[data\] format"):
        parse_job_config({"data": {"format": "avro"}, "query": query})


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_cli_reads_two_rows_from_three_jsonl_files(tmp_path: Path, capsys, fmt: str) -> None:
    """The reported empty-file case, CLI: the empty third file is 0 rows, not an error."""
    table = pa.table({"ts": pa.array([100, 2_500], pa.int64()), "v": [0.5, 1.0]})
    inputs.write_input(table, tmp_path / "in", "jsonl", n_files=3)
    out = tmp_path / "out.parquet"
    assert main(["aggregate", "--input", str(tmp_path / "in"), "--format", fmt,
                 "--window", "1s", "--agg", "count(*) as n", "--out", str(out)]) == 0
    assert "2 input rows from 1 inputs" in capsys.readouterr().out
    assert inputs.read_input(out).to_pylist() == [
        {"window_start": 0, "window_end": 1000, "n": 1},
        {"window_start": 2000, "window_end": 3000, "n": 1}]


def test_the_cli_reads_a_static_snapshot_with_the_listing_rule(tmp_path: Path) -> None:
    """Hidden files are skipped, a glob lists its matches, a single file is an input."""
    table = pa.table({"ts": pa.array([1, 2, 3, 4], pa.int64())})
    files = inputs.write_input(table, tmp_path, "parquet", n_files=2)
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".part-00000.parquet.crc").write_text("junk")
    assert inputs.read_input(tmp_path).equals(table)
    assert inputs.read_input(tmp_path / "part-*").equals(table)
    assert inputs.read_input(files[1]).column("ts").to_pylist() == [3, 4]
