"""Input shapes real writers leave, through the source (driven without a JVM) and the CLI.

Each test is an issue-43 reproduction: a writer's ``_temporary/`` copy under a glob, a directory
named like a glob, a glob that matches nothing, a zero-byte file filled late, a half-written
Parquet file completed or replaced after the query failed on it. No row may be lost silently:
each shape is read, or fails naming the file and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_stream_sched.cli import main
from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.state.input_schema import read_input_schema
from spark_stream_sched.spark.datasource import OrderedAggDataSource

from .test_reader import make_reader, run_batches


def rows(start: int, n: int) -> pa.Table:
    """``n`` rows one second apart from second ``start``, one meter."""
    return pa.table({"ts": pa.array([(start + i) * 1000 for i in range(n)], pa.int64()),
                     "meter": pa.array([1] * n, pa.int64()),
                     "value": pa.array([1.0] * n)})


def options(inputs: str, state: Path, **extra: Any) -> dict[str, str]:
    opts = {"inputs": inputs, "window": "1 hour", "keyColumns": "meter",
            "aggregates": "count(*) as n", "stateLocation": str(state),
            "endOfInput": "availableNow"}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def counted(batches: list[list[dict[str, Any]]]) -> int:
    return sum(r["n"] for batch in batches for r in batch)


def cli_count(tmp_path: Path, *inputs: str) -> int:
    out = tmp_path / "cli.parquet"
    flags = [x for path in inputs for x in ("--input", path)]
    assert main(["aggregate", *flags, "--key", "meter", "--window", "1h", "--agg",
                 "count(*) as n", "--out", str(out)]) == 0
    return sum(pq.read_table(out).column("n").to_pylist())


# -- the listing rule through the doors -----------------------------------------------------


def test_a_glob_does_not_read_a_writers_temporary_copy(tmp_path: Path) -> None:
    for start, rel in enumerate(("a/part-0.parquet", "b/part-0.parquet",
                                 "_temporary/part-0.parquet")):
        (tmp_path / "in" / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows(10 * start, 10), tmp_path / "in" / rel)
    pattern = str(tmp_path / "in" / "*" / "part-*.parquet")
    reader = make_reader(options(pattern, tmp_path / "state"))
    assert counted(run_batches(reader, limit=ReadAllAvailable())) == 20
    assert cli_count(tmp_path, pattern) == 20


def test_a_directory_named_like_a_glob_is_read(tmp_path: Path) -> None:
    for name in ("meter[1]", "meter2"):
        (tmp_path / name).mkdir()
        pq.write_table(rows(0, 10), tmp_path / name / "part-0.parquet")
    paths = (str(tmp_path / "meter[1]"), str(tmp_path / "meter2"))
    reader = make_reader(options(",".join(paths), tmp_path / "state"))
    assert counted(run_batches(reader, limit=ReadAllAvailable())) == 20
    assert cli_count(tmp_path, *paths) == 20


def test_a_glob_matching_nothing_fails_where_the_input_is_finished(tmp_path: Path,
                                                                   capsys) -> None:
    (tmp_path / "a").mkdir()
    pq.write_table(rows(0, 10), tmp_path / "a" / "part-0.parquet")
    empty = str(tmp_path / "b" / "part-*.parquet")
    inputs = f"{tmp_path / 'a'},{empty}"
    with pytest.raises(InputError, match=r"^input glob '.*part-\*\.parquet' matches no file, "
                                         r"and endOfInput=availableNow would count input 1"):
        run_batches(make_reader(options(inputs, tmp_path / "state")))
    batch = OrderedAggDataSource(options(inputs, tmp_path / "unused"))
    with pytest.raises(InputError, match=r"^input glob .* matches no file, and a batch read"):
        batch.reader(batch.schema()).partitions()
    code = main(["aggregate", "--input", str(tmp_path / "a"), "--input", empty, "--key",
                 "meter", "--window", "1h", "--agg", "count(*) as n", "--out",
                 str(tmp_path / "o.parquet")])
    assert code == 2
    assert capsys.readouterr().err.startswith(
        f"spark-stream-sched aggregate: error: input glob {empty!r} matches no file")
    # a stream that may still receive files waits for them, as before
    reader = make_reader(options(inputs, tmp_path / "state2", endOfInput="never"))
    assert counted(run_batches(reader, available_now=False)) == 0  # no window closed yet


# -- files that change after they are listed --------------------------------------------------


def run_from(reader: Any, start: Any, limit: Any = None) -> tuple[Any, int]:
    """Run batches from ``start`` until the offset stops moving: (last offset, rows counted)."""
    total = 0
    while (end := reader.latestOffset(start, limit or reader.getDefaultReadLimit())) != start:
        total += sum(r["n"] for p in reader.partitions(start, end) for b in reader.read(p)
                     for r in b.to_pylist())
        reader.commit(end)
        start = end
    return start, total


def first_run(tmp_path: Path, **extra: Any) -> tuple[dict[str, str], Any, int]:
    """An AvailableNow run with endOfInput=never over ``in``: options, last offset, rows."""
    opts = options(str(tmp_path / "in"), tmp_path / "state", endOfInput="never",
                   maxRecordsPerTrigger=150, **extra)
    reader = make_reader(opts)
    reader.prepareForTriggerAvailableNow()
    end, total = run_from(reader, reader.initialOffset())
    reader.stop()
    return opts, end, total


def restart(opts: dict[str, str], **extra: str) -> Any:
    reader = make_reader({**opts, "endOfInput": "availableNow", **extra})
    reader.prepareForTriggerAvailableNow()
    return reader


@pytest.fixture
def parts(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    return tmp_path / "in"


def test_a_zero_byte_file_filled_after_a_later_file_was_read_is_a_late_file(
        tmp_path: Path, parts: Path) -> None:
    pq.write_table(rows(0, 200), parts / "part-000.parquet")
    (parts / "part-001.parquet").write_bytes(b"")  # a writer opened its final path
    pq.write_table(rows(400, 200), parts / "part-002.parquet")
    opts, end, _ = first_run(tmp_path)
    pq.write_table(rows(200, 200), parts / "part-001.parquet")
    reader = restart(opts)
    with pytest.raises(InputError, match=rf"^input 0 \('{parts}'\): file "
                                         rf"'{parts}/part-001.parquet' appeared after"):
        run_from(reader, end)
    skipping = restart(opts, lateFiles="skip")  # or logged and counted, never read in silence
    assert run_from(skipping, end)[1] == 400
    assert skipping.driver.manifests[0].skipped_count == 1


def test_a_zero_byte_last_file_is_read_once_it_is_written(tmp_path: Path, parts: Path) -> None:
    pq.write_table(rows(0, 200), parts / "part-000.parquet")
    (parts / "part-001.parquet").write_bytes(b"")
    opts, end, _ = first_run(tmp_path)
    pq.write_table(rows(200, 200), parts / "part-001.parquet")
    assert run_from(restart(opts), end)[1] == 400


def test_a_file_read_from_must_not_change_its_modification_time(tmp_path: Path,
                                                                parts: Path) -> None:
    pq.write_table(rows(0, 200), parts / "part-000.parquet")
    opts, end, _ = first_run(tmp_path)
    stat = (parts / "part-000.parquet").stat()
    os.utime(parts / "part-000.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(InputError, match=rf"^input 0 file '{parts}/part-000.parquet' was "
                                         rf"modified after the source admitted it"):
        run_from(restart(opts), end)


def half_written(path: Path, table: pa.Table) -> bytes:
    """Leave the first half of ``table``'s Parquet bytes at ``path``; return the whole."""
    pq.write_table(table, path)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    return whole


@pytest.mark.parametrize("fix", ["complete", "replace", "remove"])
def test_a_half_written_parquet_file_can_be_fixed(tmp_path: Path, parts: Path,
                                                  fix: str) -> None:
    pq.write_table(rows(0, 200), parts / "part-000.parquet")
    opts, end, counted_before = first_run(tmp_path)
    late = parts / "part-001.parquet"
    whole = half_written(late, rows(200, 200))
    with pytest.raises(InputError,
                       match=rf"^input 0 \({parts}\): cannot read parquet file '{late}'"):
        run_from(restart(opts), end)
    if fix == "complete":
        late.write_bytes(whole)
    elif fix == "replace":
        pq.write_table(rows(200, 50), late)
    else:
        late.unlink()
    expected = {"complete": 400, "replace": 250, "remove": 200}[fix]
    assert counted_before + run_from(restart(opts), end)[1] == expected


def test_an_offset_of_swapped_inputs_is_refused_as_foreign(tmp_path: Path) -> None:
    for name, start in (("a", 0), ("b", 100)):
        (tmp_path / name).mkdir()
        pq.write_table(rows(start, 100), tmp_path / name / "part-0.parquet")
    opts = options(f"{tmp_path / 'a'},{tmp_path / 'b'}", tmp_path / "state",
                   endOfInput="never")
    reader = make_reader(opts)
    initial = reader.initialOffset()
    end, _ = run_from(reader, initial)
    swapped = {**end, "inputs": end["inputs"][::-1]}
    with pytest.raises(StateError, match=rf"^the offset's cursor of input 0 \({tmp_path / 'a'}\)"
                                         rf" is in '{tmp_path / 'b'}/part-0.parquet', a file of "
                                         rf"input 1 .*: the offset does not belong to these"):
        reader.latestOffset(swapped, ReadAllAvailable())
    with pytest.raises(StateError, match="the offset does not belong to these inputs"):
        reader.partitions(initial, swapped)  # a replay of the tampered batch


def test_a_uint64_event_time_past_int64_is_refused_naming_input_file_row_and_value(
        tmp_path: Path, parts: Path, capsys) -> None:
    table = rows(0, 3)
    table = table.set_column(0, "ts", pa.array([2**64 - 1, 1000, 2000], pa.uint64()))
    pq.write_table(table, parts / "part-0.parquet")  # its first row would wrap to -1 ms
    with pytest.raises(InputError, match=rf"^input 0 .*file '{parts}/part-0.parquet'.*event time "
                                         rf"{2**64 - 1} ms in column 'ts' at row 0 is outside"):
        run_batches(make_reader(options(str(parts), tmp_path / "state")))
    assert main(["aggregate", "--input", str(parts), "--window", "1h", "--agg", "count(*) as n",
                 "--out", str(tmp_path / "o.parquet")]) == 2
    assert f"event time {2**64 - 1} ms in column 'ts' at row 0" in capsys.readouterr().err


@pytest.mark.spark
def test_csv_values_read_as_spark_reads_them(spark: Any, tmp_path: Path) -> None:
    """NaN, the infinities and nulls: the input layer and Spark's CSV reader agree."""
    from spark_stream_sched.inputs import read_input, write_input

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.csv").write_text(
        "ts,v\n1,1.5\n2,NaN\n3,\n4,Infinity\n5,-Infinity\n6,nan\n7,Inf\n")
    table = pa.table({"ts": [8, 9, 10], "v": [float("nan"), float("inf"), None]})
    write_input(table, tmp_path / "in" / "w", "csv")  # the writer's text, read by both
    ours = [repr(v) for path in (tmp_path / "in", tmp_path / "in" / "w")
            for v in read_input(path, "csv", schema=pa.schema(
                [("ts", pa.int64()), ("v", pa.float64())])).column("v").to_pylist()]
    theirs = [repr(r["v"]) for path in (tmp_path / "in", tmp_path / "in" / "w")
              for r in spark.read.schema("ts long, v double").option("header", True)
              .csv(str(path)).orderBy("ts").collect()]
    assert ours == theirs


# -- the input schema of the first start ------------------------------------------------------


def jsonl(path: Path, start: int, values: list[str]) -> None:
    path.write_text("".join(f'{{"ts": {(start + i) * 1000}, "meter": 1, "value": {v}}}\n'
                            for i, v in enumerate(values)))


def test_a_restart_reads_with_the_schema_of_the_first_start(tmp_path: Path,
                                                            parts: Path) -> None:
    """Consumed files deleted, the next first file has whole numbers: value stays double."""
    jsonl(parts / "part-000.jsonl", 0, ["1.5"] * 10)
    jsonl(parts / "part-001.jsonl", 10, ["2"] * 10)
    opts = options(str(parts), tmp_path / "state", format="json", endOfInput="never",
                   aggregates="count(*) as n, sum(value) as total")
    reader = make_reader(opts)
    end, _ = run_from(reader, reader.initialOffset())
    reader.stop()
    (parts / "part-000.jsonl").unlink()  # consumed: the cursor is in part-001
    jsonl(parts / "part-002.jsonl", 20, ["14.25"] * 10)
    restarted = restart(opts)
    last = restarted.latestOffset(end, ReadAllAvailable())
    out = [r for p in restarted.partitions(end, last) for b in restarted.read(p)
           for r in b.to_pylist()]
    assert out == [{"window_start": 0, "window_end": 3_600_000, "meter": 1, "n": 30,
                    "total": 10 * 1.5 + 10 * 2 + 10 * 14.25}]
    assert read_input_schema(opts["stateLocation"]).field("value").type == pa.float64()
