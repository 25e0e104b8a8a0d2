"""The sink's output path belongs to one query, as its state location does.

Two queries on one ``path`` write the same ``part-batch-<id>.parquet`` names, so the output path
carries an owner record (``<path>/_ordered-agg-sink.json``) created exclusively when Spark
creates the first writer; a second query is refused naming the first before it writes anything,
and every commit checks the record again. A path that is, or lies below, a regular file is a
one-line error at the same point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
from spark_stream_sched.spark import register, sink

from .test_sink import (
    FakeTasks,
    batches_of,
    expected_rows,
    make_inputs,
    options,
    output_rows,
    start_sink_query,
    write_file_streams,
)
from .test_sink_distributed import stream_schema

#: The output path's owner record.
RECORD = "_ordered-agg-sink.json"


def _start(opts: dict[str, str], schema: Any) -> sink.OrderedAggStreamWriter | StateError:
    """What Spark does when it plans a query's first micro-batch: create the writer."""
    try:
        return sink.make_stream_writer(opts, schema)
    except StateError as exc:
        return exc


def test_two_writers_started_together_on_one_path_the_second_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both writers are created before either commits, then their batches interleave.

    The old claim looked only for result files, which neither query had written yet: both
    went on, and the second query's ``part-batch-<id>`` files replaced the first's.
    """
    out = str(tmp_path / "out")
    inputs = {"a": make_inputs(seed=7), "b": make_inputs(seed=8)}
    opts = {q: options(tmp_path / q, path=out) for q in inputs}
    schema = stream_schema(inputs["a"])
    started = {q: _start(opts[q], schema) for q in inputs}
    writers = {q: w for q, w in started.items() if isinstance(w, sink.OrderedAggStreamWriter)}
    batches = {q: batches_of(inputs[q], 3, 2, seed=1) for q in writers}
    for batch_id in range(3):
        for q, writer in writers.items():
            writer.commit(FakeTasks(monkeypatch, writer).write(batch_id, batches[q][batch_id]),
                          batch_id)
    refused = started["b"]
    assert isinstance(refused, StateError), "the second query on the path was not refused"
    first_line = str(refused).splitlines()[0]
    assert first_line.startswith(f"ordered-agg sink output path {out} belongs to another query "
                                 f"(checkpointLocation='{tmp_path / 'a' / 'ck'}'")
    assert f"this query has checkpointLocation='{tmp_path / 'b' / 'ck'}'" in first_line
    assert not (tmp_path / "b" / "ck" / "ordered-agg-sink" / "_sink.json").exists()
    sink.finish_sink(opts["a"])
    assert output_rows(Path(out)) == expected_rows(inputs["a"])


def test_every_commit_checks_the_output_owner(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    opts = options(tmp_path)
    writer = sink.make_stream_writer(opts, stream_schema(make_inputs()))
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(make_inputs(), 3, 2, seed=2)
    for batch_id in (0, 1):
        writer.commit(tasks.write(batch_id, batches[batch_id]), batch_id)
    record = tmp_path / "out" / RECORD
    record.unlink()
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    with pytest.raises(StateError, match=rf"^ordered-agg sink output path {tmp_path / 'out'} "
                                         rf"has no owner record {RECORD} but the sink "
                                         rf"state .* has committed batches"):
        writer.commit(tasks.write(2, batches[2]), 2)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_a_restart_of_the_same_query_keeps_its_path(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tables = make_inputs()
    opts = options(tmp_path)
    batches = batches_of(tables, 3, 2, seed=3)
    for batch_id in range(3):  # a new writer per batch: Spark's planner after each restart
        writer = sink.make_stream_writer(opts, stream_schema(tables))
        writer.commit(FakeTasks(monkeypatch, writer).write(batch_id, batches[batch_id]), batch_id)
    sink.finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(tables)


@pytest.mark.parametrize("below", [False, True])
def test_a_path_that_is_or_lies_below_a_file_is_refused_when_the_writer_is_made(
        tmp_path: Path, below: bool) -> None:
    """It was a bare ``NotADirectoryError`` from the sweep of the first commit."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    path = blocker / "out" if below else blocker
    where = f"lies below '{blocker}', which is" if below else "is"
    with pytest.raises(ConfigError, match=rf"^ordered-agg sink option path '{path}' {where} a "
                                          rf"file, not a directory; set path to a directory"):
        sink.make_stream_writer(options(tmp_path, path=str(path)),
                                stream_schema(make_inputs()))
    assert blocker.read_text() == "not a directory"
    assert not (tmp_path / "ck" / "ordered-agg-sink" / "_sink.json").exists()


@pytest.mark.spark
def test_two_spark_queries_started_together_on_one_path(spark: Any, tmp_path: Path) -> None:
    """The issue's case: both queries finished with ``exception() is None``."""
    register(spark)
    tables = make_inputs(rows=1_000)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=3)
    out = str(tmp_path / "out")
    opts = {q: options(tmp_path / q, path=out, sequenceColumn=SEQUENCE_COLUMN) for q in "ab"}
    queries = {q: start_sink_query(spark, dirs, tables[0].schema, opts[q], files_per_trigger=1)
               for q in "ab"}
    errors = {}
    for q, query in queries.items():
        try:
            query.awaitTermination()
        except Exception as exc:  # noqa: BLE001 - Spark's StreamingQueryException
            errors[q] = str(exc)
    assert len(errors) == 1, f"exactly one query must be refused, got {sorted(errors)}"
    (loser,) = errors
    winner = "b" if loser == "a" else "a"
    assert (f"ordered-agg sink output path {out} belongs to another query (checkpointLocation="
            f"'{tmp_path / winner / 'ck'}'") in errors[loser]
    sink.finish_sink(opts[winner])
    assert output_rows(Path(out)) == expected_rows(tables)


@pytest.mark.spark
def test_spark_sink_path_below_a_file_fails_with_one_line(spark: Any, tmp_path: Path) -> None:
    register(spark)
    tables = make_inputs(rows=300)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=1)
    (tmp_path / "file").write_text("x")
    opts = options(tmp_path, path=str(tmp_path / "file" / "out"),
                   sequenceColumn=SEQUENCE_COLUMN)
    query = start_sink_query(spark, dirs, tables[0].schema, opts, files_per_trigger=1)
    with pytest.raises(Exception, match=r"ConfigError: ordered-agg sink option path .*/file/out' "
                                        r"lies below .*, which is a file, not a directory"):
        query.awaitTermination()
