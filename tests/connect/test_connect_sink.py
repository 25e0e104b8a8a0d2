"""The ``ordered-agg`` sink from a Spark Connect client, fed by Spark's file streams.

One stream per input directory, tagged with its input id and a file-position sequence column
(``jobs.runner.file_streams``), moved by partition group (``partition_for_sink``), written with
``writeStream.format("ordered-agg")``. Inputs end either by :func:`finish_sink` called by the
client after the query (it writes next to the server's files, so it needs their file system) or
by end-of-input rows, which need nothing outside Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN, file_streams
from spark_stream_sched.progress import sink_progress
from spark_stream_sched.spark.sink import finish_sink, partition_for_sink
from tests.spark.test_sink import (
    expected_rows,
    make_inputs,
    options,
    output_rows,
    write_file_streams,
)

pytestmark = pytest.mark.connect


def start(spark: Any, dirs: list[Path], schema: pa.Schema, opts: dict[str, str]) -> Any:
    """The sink query over one file stream per directory, one file per trigger."""
    frame = file_streams(spark, dirs, "parquet", schema, 1, with_position=True)
    frame = partition_for_sink(frame.drop("dc").withColumnRenamed("input_id", "dc"), opts)
    return (frame.writeStream.format("ordered-agg").options(**opts)
            .trigger(availableNow=True).start())


def test_file_streams_into_the_sink_equal_the_oracle(connect: Any, tmp_path: Path) -> None:
    tables = make_inputs(rows=900)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=3)
    opts = options(tmp_path, sequenceColumn=SEQUENCE_COLUMN)
    query = start(connect, dirs, tables[0].schema, opts)
    query.awaitTermination(300)
    assert query.exception() is None
    finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(tables)

    commits = sink_progress(str(tmp_path / "ck" / "ordered-agg-sink"), query.recentProgress)
    spark_batches = {p.batchId: p.numInputRows for p in query.recentProgress}
    assert [c["batch_id"] for c in commits] == [*sorted(spark_batches), "final"]
    assert len(commits) >= 4  # one file per trigger, three files per input
    for c in commits[:-1]:
        assert c["spark_input_rows"] == c["rows_in"] == spark_batches[c["batch_id"]]
        assert c["groups_on_driver"] == 0  # partition_for_sink: every group in one task
    assert sum(c["rows_in"] for c in commits) == sum(t.num_rows for t in tables)
    assert sum(c["rows_out"] for c in commits) == len(expected_rows(tables))


def test_end_of_input_rows_close_every_window_without_finish_sink(connect: Any,
                                                                 tmp_path: Path) -> None:
    tables = make_inputs(rows=600)
    ended = [pa.concat_tables([t, t.slice(t.num_rows - 1)]).append_column(
        "eof", pa.array([False] * t.num_rows + [True])) for t in tables]  # last row: the end
    dirs = write_file_streams(ended, tmp_path / "in", files_per_input=2)
    opts = options(tmp_path, sequenceColumn=SEQUENCE_COLUMN, endOfInputColumn="eof")
    query = start(connect, dirs, ended[0].schema, opts)
    query.awaitTermination(300)
    assert query.exception() is None
    assert output_rows(tmp_path / "out") == expected_rows(tables)
    commits = sink_progress(str(tmp_path / "ck" / "ordered-agg-sink"))
    assert commits[-1]["finished"] == [0, 1, 2]
    assert "final" not in [c["batch_id"] for c in commits]
