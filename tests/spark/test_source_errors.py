"""Errors a user can act on: our message, naming what failed and what to do, on the first line.

Before, these arrived as 11–45-line Python-worker tracebacks with the useful line last (or, for a
truncated offset, a bare ``JSONDecodeError`` from pyspark's runner), and some said nothing.
"""

from __future__ import annotations

import glob
import logging
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched import inputs
from spark_stream_sched.errors import ConfigError, FormatMismatchError, InputError
from spark_stream_sched.inputs import Cursor, InputStream
from spark_stream_sched.options.source import parse_options
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source import OrderedAggStreamReader

from .helpers import run_available_now, source_options, start_query, write_inputs


def first_line(query: Any) -> str:
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException):
        query.awaitTermination(180)
    error = query.exception()
    assert error is not None
    return str(error).splitlines()[0]


def truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def make_reader(opts: dict[str, str]) -> OrderedAggStreamReader:
    source = OrderedAggDataSource(opts)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, OrderedAggStreamReader)
    return reader


# -- without a JVM ----------------------------------------------------------------------------


def test_truncated_parquet_file_names_input_file_and_remedy(tmp_path) -> None:
    write_inputs(str(tmp_path), n_inputs=2, rows=60)
    files = inputs.list_files(str(tmp_path / "in1"))
    truncate(files[1])
    stream = InputStream(1, str(tmp_path / "in1"), "parquet", None)
    with pytest.raises(InputError) as info:
        inputs.available_rows(files, Cursor(), "parquet", None, stream)
    message = str(info.value)
    assert message.startswith(f"input 1 ({tmp_path / 'in1'}): cannot read parquet file "
                              f"{files[1]!r}: Parquet magic bytes not found")
    assert "fix or replace the file" in message


def unsorted_input(root) -> str:
    """Inputs ``root/in0`` (sorted) and ``root/in1``, whose second file goes back in time."""
    write_inputs(str(root), n_inputs=2, rows=60)
    late = inputs.list_files(str(root / "in1"))[1]
    table = pq.read_table(late)
    ts = table.column("ts").to_pylist()
    pq.write_table(table.set_column(0, "ts", pa.array([ts[0], ts[1], ts[0] - 5_000] + ts[3:],
                                                      pa.int64())), late)
    return late


def test_out_of_order_names_input_directory_file_row_and_the_option(tmp_path) -> None:
    late = unsorted_input(tmp_path)
    reader = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "state"),
                                        splitRows="driver"))
    with pytest.raises(InputError) as info:
        reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"input 1 ({tmp_path / 'in1'}) is out of order in file {late!r} at "
                            f"row 2 (0-based; position ")
    assert first.endswith(" of the same input; sort the input by event time, or set "
                          "outOfOrder=drop to drop such rows")


def test_csv_over_parquet_files_says_which_format_to_set(tmp_path) -> None:
    write_inputs(str(tmp_path), n_inputs=2, rows=60)
    first_file = inputs.list_files(str(tmp_path / "in0"))[0]
    opts = source_options(str(tmp_path), 2, str(tmp_path / "state"), format="csv")
    with pytest.raises(FormatMismatchError) as info:  # the schema is resolved on the driver
        make_reader(opts)
    assert str(info.value) == (f"file {first_file!r} is not CSV (it looks like Parquet); set "
                               f"option format=parquet, or move the file out of the input")


def test_path_option_points_at_inputs() -> None:
    opts = {"window": "10s", "aggregates": "count(*) as n", "stateLocation": "/s"}
    with pytest.raises(ConfigError, match=r"takes its input directories from option inputs, not "
                                          r"from load\(path\) or option path='/d'"):
        parse_options(opts | {"path": "/d"})


def test_available_now_without_end_of_input_warns_naming_the_option(tmp_path, caplog) -> None:
    write_inputs(str(tmp_path), n_inputs=1, rows=50)
    reader = make_reader(source_options(str(tmp_path), 1, str(tmp_path / "state"),
                                        endOfInput="never"))
    with caplog.at_level(logging.WARNING):
        reader.prepareForTriggerAvailableNow()
    reader.stop()
    assert "set option endOfInput=availableNow to flush the last windows" in caplog.text


@pytest.mark.parametrize(("mode", "available_now", "says"), [
    ("availableNow", True, "with endOfInput=availableNow it counts as finished and empty"),
    ("exhausted", False, "with endOfInput=exhausted it counts as finished and empty"),
    ("never", False, "no window closes until it sends a row"),
])
def test_an_input_without_files_at_start_is_reported(tmp_path, caplog, mode: str,
                                                     available_now: bool, says: str) -> None:
    write_inputs(str(tmp_path), n_inputs=1, rows=50)
    os.makedirs(tmp_path / "in1")
    reader = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "state"),
                                        endOfInput=mode))
    with caplog.at_level(logging.WARNING):
        if available_now:
            reader.prepareForTriggerAvailableNow()
        start = reader.initialOffset()
        reader.latestOffset(start, reader.getDefaultReadLimit())
    reader.stop()
    warnings = [r.getMessage() for r in caplog.records if "holds no files" in r.getMessage()]
    assert len(warnings) == 1  # once per driver process
    assert warnings[0].startswith(f"input 1 ({tmp_path / 'in1'}) holds no files")
    assert says in warnings[0]


# -- a real Spark query -----------------------------------------------------------------------


@pytest.mark.spark
def test_truncated_input_file_fails_with_our_first_line(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=60)
    truncate(inputs.list_files(str(tmp_path / "in" / "in1"))[1])
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"))
    line = first_line(start_query(spark, opts, str(tmp_path / "ckpt"), []))
    assert "InputError: input 1 (" in line
    assert "part-00001.parquet': Parquet magic bytes not found" in line
    assert "fix or replace the file" in line


@pytest.mark.spark
@pytest.mark.parametrize("split_rows", ["driver", "tasks"])
def test_out_of_order_input_fails_with_our_first_line(spark, tmp_path, split_rows: str) -> None:
    """``driver``: ``latestOffset`` refuses the row; ``tasks`` (Parquet's default): the task.

    A task's error reaches a ``foreachBatch`` function inside Spark's Python traceback of that
    function, so the tasks' case writes to Parquet, as a query would.
    """
    late = unsorted_input(tmp_path / "in")
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"), splitRows=split_rows)
    if split_rows == "driver":
        query = start_query(spark, opts, str(tmp_path / "ckpt"), [])
    else:
        query = (spark.readStream.format("ordered-agg").options(**opts).load().writeStream
                 .format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "ckpt"))
                 .trigger(availableNow=True).start())
    line = first_line(query)
    assert f"OutOfOrderError: input 1 ({tmp_path / 'in' / 'in1'}) is out of order in file " \
           f"{late!r} at row 2 (0-based; position " in line
    assert line.endswith("or set outOfOrder=drop to drop such rows")


@pytest.mark.spark
def test_a_format_mismatch_fails_with_our_first_line(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=60, fmt="jsonl")
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"), format="parquet")
    first_file = inputs.list_files(str(tmp_path / "in" / "in0"))[0]
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as info:  # the schema is resolved at load()
        start_query(spark, opts, str(tmp_path / "ckpt"), [])
    assert str(info.value).splitlines()[0] == (
        f"[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
        f"spark_stream_sched.errors.FormatMismatchError: file {first_file!r} is not Parquet (it "
        f"looks like JSON lines); set option format=jsonl, or move the file out of the input")


@pytest.mark.spark
def test_truncated_checkpoint_offset_names_the_offset_log(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=100)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"),
                          maxRecordsPerTrigger=150)
    ckpt = str(tmp_path / "ckpt")
    run_available_now(spark, opts, ckpt)
    newest = max(glob.glob(os.path.join(ckpt, "offsets", "[0-9]*")),
                 key=lambda p: int(os.path.basename(p)))
    with open(newest) as f:
        text = f.read()
    with open(newest, "w") as f:
        f.write(text[:-30])  # the source offset, the last line, is cut short
    os.remove(os.path.join(ckpt, "commits", os.path.basename(newest)))
    line = first_line(start_query(spark, opts, ckpt, []))
    assert "StateError: a source offset in the query's checkpoint offset log is not valid " \
           "JSON" in line
    assert "delete the newest offsets/<batch id> file" in line


@pytest.mark.spark
def test_full_disk_during_state_write_reaches_the_first_line(spark, tmp_path, small_disk) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=3000)
    opts = source_options(str(tmp_path / "in"), 2, str(small_disk / "state"),
                          partitionGroups=64)
    query = (spark.readStream.format("ordered-agg").options(**opts).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    line = first_line(query)
    assert "SpillError: cannot write " + str(small_disk / "state") in line
    assert "No space left on device" in line
    assert "free space on that file system" in line


@pytest.mark.spark
def test_sink_option_typo_says_it_was_checked_at_the_first_batch(spark, tmp_path) -> None:
    query = (spark.readStream.format("rate").load().writeStream.format("ordered-agg")
             .option("path", str(tmp_path / "out")).option("inputs", "1")
             .option("windw", "10s").option("aggregates", "count(*) as n")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    line = first_line(query)
    assert "ConfigError: ordered-agg sink options (checked when Spark planned the first " \
           "micro-batch" in line
    assert "unknown option 'windw' for the ordered-agg sink; did you mean 'window'?" in line


@pytest.mark.spark
def test_load_path_is_refused_at_load_pointing_at_inputs(spark, tmp_path) -> None:
    opts = source_options(str(tmp_path), 1, str(tmp_path / "state"))
    del opts["inputs"]
    with pytest.raises(Exception, match="not from load") as info:
        spark.readStream.format("ordered-agg").options(**opts).load(str(tmp_path / "in0"))
    assert "write .option('inputs'," in str(info.value).splitlines()[0]


@pytest.mark.spark
def test_a_sink_commit_error_reaches_the_first_line(spark, tmp_path) -> None:
    """The sink's commit runs in a Spark Python worker on the driver: before, Spark's first line
    was ``Traceback (most recent call last):`` and ours came 8 lines later."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "in").mkdir()
    rows = pa.table({"ts": pa.array([5000, 1000, 3000], pa.int64()), "meter": ["m"] * 3,
                     "dc": pa.array([0] * 3, pa.int32()), "pos": pa.array([0, 1, 2], pa.int64())})
    pq.write_table(rows, tmp_path / "in" / "part-0.parquet")
    stream = spark.readStream.schema(spark.createDataFrame(rows.to_pandas()).schema) \
        .parquet(str(tmp_path / "in"))
    query = (stream.writeStream.format("ordered-agg").option("path", str(tmp_path / "out"))
             .option("inputs", "1").option("inputColumn", "dc").option("window", "10s")
             .option("aggregates", "count(*) as n").option("sequenceColumn", "pos")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    line = first_line(query)
    assert "perform commit: spark_stream_sched.errors.InputError: ordered-agg sink: batch 0: " \
           "input 0 is out of order along 'pos': pos 1 has ts 1000 after ts 5000 at pos 0" \
           in line, line


@pytest.mark.spark
def test_bounded_options_fail_at_load_with_our_first_line(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=1, rows=20)
    opts = source_options(str(tmp_path / "in"), 1, str(tmp_path / "state"),
                          maxRecordsPerTrigger="100000000000000000000")
    with pytest.raises(Exception, match="must be at most") as info:
        spark.readStream.format("ordered-agg").options(**opts).load()
    assert ("ConfigError: option maxRecordsPerTrigger='100000000000000000000' must be at most "
            "9223372036854775807") in str(info.value).splitlines()[0]
