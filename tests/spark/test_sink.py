"""The ``ordered-agg`` sink: results equal the reference oracle, exactly once per batch id.

Driver-side tests call the writer's ``write``/``commit`` directly (``write`` with a faked task
identity); the ``spark`` tests run real streaming queries on the session-scoped local[2] Spark.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.spark import register, sink
from spark_stream_sched.testing.reference import reference_aggregate

AGGREGATES = ("count(*) as n, avg(value) as mean, first(value) as first_v, "
              "last(kind) as last_kind, max(ts) as last_ts, max_by(value, ts) as value_by_ts")
WINDOW = WindowSpec(size_ms=20_000, slide_ms=5_000)


def make_inputs(n_inputs: int = 3, rows: int = 1_200, seed: int = 7) -> list[pa.Table]:
    return smart_grid_streams(n_inputs, 30, rows=rows, seed=seed)


def expected_rows(tables: list[pa.Table]) -> list[tuple[Any, ...]]:
    return canonical(reference_aggregate(tables, WINDOW, ["meter"], AGGREGATES))


def canonical(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples in output order; means rounded (float sums may differ in the last ulp)."""
    return [(r["window_start"], r["window_end"], r["meter"], r["n"],
             None if r["mean"] is None else round(r["mean"], 9), r["first_v"], r["last_kind"],
             r["last_ts"]) for r in rows]


def output_rows(path: Path) -> list[tuple[Any, ...]]:
    """All rows the sink wrote, files in name order (= commit order)."""
    files = sorted(p for p in path.glob("part-*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    return canonical(rows)


def options(tmp_path: Path, n_inputs: int = 3, **extra: str) -> dict[str, str]:
    return {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": str(n_inputs), "inputColumn": "dc", "keyColumns": "meter",
            "window": "20s", "slide": "5s", "aggregates": AGGREGATES, **extra}


class FakeTasks:
    """Runs ``write`` as if inside Spark tasks of a given batch (patches the task identity)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, writer: sink.OrderedAggStreamWriter):
        self.monkeypatch = monkeypatch
        self.writer = writer

    def write(self, batch_id: int, partitions: list[pa.Table]) -> list[sink.SinkCommitMessage]:
        messages = []
        for p, table in enumerate(partitions):
            self.monkeypatch.setattr(sink, "_task_identity", lambda p=p: (batch_id, p, 0))
            messages.append(self.writer.write(iter(table.to_batches(max_chunksize=97))))
        return messages


def batches_of(tables: list[pa.Table], n_batches: int, n_partitions: int,
               seed: int) -> list[list[pa.Table]]:
    """Cut every input into ``n_batches`` consecutive pieces; shuffle each batch's rows across
    ``n_partitions`` tasks (Spark keeps no order between tasks)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n_batches):
        pieces = []
        for t in tables:
            lo, hi = (t.num_rows * b) // n_batches, (t.num_rows * (b + 1)) // n_batches
            pieces.append(t.slice(lo, hi - lo))
        rows = pa.concat_tables(pieces)
        order = rng.permutation(rows.num_rows)
        cuts = np.array_split(order, n_partitions)
        out.append([rows.take(pa.array(c, pa.int64())) for c in cuts])
    return out


@pytest.mark.parametrize(("n_batches", "n_partitions"), [(1, 1), (4, 2), (9, 3)])
def test_commits_equal_reference_for_any_batching(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  n_batches: int, n_partitions: int) -> None:
    tables = make_inputs()
    opts = options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    for batch_id, partitions in enumerate(batches_of(tables, n_batches, n_partitions, seed=1)):
        writer.commit(tasks.write(batch_id, partitions), batch_id)
    final = sink.finish_sink(opts)
    assert final is not None
    assert final["finished"] == [0, 1, 2]
    assert output_rows(tmp_path / "out") == expected_rows(tables)
    assert not any((tmp_path / "ck" / "ordered-agg-sink" / "staging").iterdir())


def test_replayed_batch_id_writes_nothing_twice(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tables = make_inputs()
    opts = options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(tables, 3, 2, seed=2)
    for batch_id in (0, 1):
        writer.commit(tasks.write(batch_id, batches[batch_id]), batch_id)
    out = tmp_path / "out"
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    assert before, "the first two batches closed some windows"
    # Spark re-runs batch 1 after a restart: new task attempts stage the rows again.
    writer.commit(tasks.write(1, batches[1]), 1)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    assert after == before
    record = sink.SinkCommitter(writer.config).commit_batch(1, [])
    assert record["replayed"] is True
    writer.commit(tasks.write(2, batches[2]), 2)
    sink.finish_sink(opts)
    assert sink.finish_sink(opts)["replayed"] is True  # type: ignore[index]
    rows = output_rows(out)
    assert rows == expected_rows(tables)
    assert len(set(rows)) == len(rows)


def test_crash_before_commit_marker_recomputes_identical_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = make_inputs()
    opts = options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(tables, 3, 2, seed=3)
    for batch_id in (0, 1):
        writer.commit(tasks.write(batch_id, batches[batch_id]), batch_id)
    out = tmp_path / "out"
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    # The crash: output and state of batch 1 were written, its commit marker was not.
    (tmp_path / "ck" / "ordered-agg-sink" / "commits" / "batch-000000000001.json").unlink()
    writer.commit(tasks.write(1, batches[1]), 1)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_failed_task_aborts_with_clear_error(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    opts = options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    messages: list[Any] = FakeTasks(monkeypatch, writer).write(0, [make_inputs()[0]])
    staging = sink.staging_dir(writer.config, 0)
    assert any(staging.iterdir())
    with pytest.raises(StateError, match=r"batch 0: 1 of 2 write tasks failed"):
        writer.commit([*messages, None], 0)
    assert not staging.exists()
    assert not (tmp_path / "ck" / "ordered-agg-sink" / "commits").exists()
    assert not (tmp_path / "out").exists()


def test_input_id_out_of_range_is_a_clear_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tables = make_inputs(n_inputs=3)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(options(tmp_path, 2)))
    messages = FakeTasks(monkeypatch, writer).write(0, [pa.concat_tables(tables)])
    with pytest.raises(InputError, match=r"input id 2 .* outside 0\.\.1 \(option inputs=2\)"):
        writer.commit(messages, 0)


def test_end_of_input_rows_finish_inputs(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tables = [t.append_column("end", pa.array([False] * t.num_rows)) for t in make_inputs()]
    markers = [pa.table({**{c: pa.nulls(1, t.schema.field(c).type) for c in t.column_names},
                         "dc": pa.array([i], pa.int32()), "end": pa.array([True]),
                         "ts": pa.array([0], pa.int64())}).select(t.column_names)
               for i, t in enumerate(tables)]
    opts = options(tmp_path, endOfInputColumn="end")
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    writer.commit(tasks.write(0, [pa.concat_tables(tables)]), 0)
    writer.commit(tasks.write(1, [pa.concat_tables(markers)]), 1)
    plain = [t.drop_columns(["end"]) for t in tables]
    assert output_rows(tmp_path / "out") == expected_rows(plain)
    with pytest.raises(InputError, match="input 0, which was declared finished"):
        writer.commit(tasks.write(2, [tables[0].slice(0, 3)]), 2)


def test_sequence_column_orders_equal_timestamps_of_one_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def stream(dc: int, ts: list[int], values: list[float]) -> pa.Table:
        n = len(ts)
        return pa.table({"ts": pa.array(ts, pa.int64()), "meter": pa.array([1] * n, pa.int64()),
                         "value": values, "kind": ["reading"] * n,
                         "dc": pa.array([dc] * n, pa.int32())})

    tables = [stream(0, [1_000, 1_000, 1_000, 9_000], [3.0, 1.0, 2.0, 4.0]),
              stream(1, [1_000, 2_000], [7.0, 5.0])]
    with_seq = [t.append_column("seq", pa.array(range(t.num_rows), pa.int64())) for t in tables]
    rows = pa.concat_tables(with_seq)
    shuffled = [rows.take(pa.array([5, 2, 0])), rows.take(pa.array([4, 1, 3]))]
    writer = sink.OrderedAggStreamWriter(
        sink.parse_sink_options(options(tmp_path, 2, sequenceColumn="seq")))
    writer.commit(FakeTasks(monkeypatch, writer).write(0, shuffled), 0)
    sink.finish_sink(options(tmp_path, 2, sequenceColumn="seq"))
    got = output_rows(tmp_path / "out")
    assert got == expected_rows(tables)
    assert got[0][5] == 3.0  # first(value) of window [-15 s, 5 s): input 0's first row


def test_options_are_validated_with_suggestions(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'keyColumns'"):
        sink.parse_sink_options({**options(tmp_path), "keyColumn": "meter"})
    with pytest.raises(ConfigError, match="option inputs is required"):
        sink.parse_sink_options({k: v for k, v in options(tmp_path).items() if k != "inputs"})
    config = sink.parse_sink_options(options(tmp_path))
    schema = make_inputs()[0].schema
    with pytest.raises(ConfigError, match="inputColumn='nope'"):
        sink.check_schema(sink.parse_sink_options({**options(tmp_path), "inputColumn": "nope"}),
                          schema)
    sink.check_schema(config, schema)


# -- real streaming queries ------------------------------------------------------------------


def write_file_streams(tables: list[pa.Table], root: Path, files_per_input: int) -> list[Path]:
    """One directory per input; files in name order with increasing modification times."""
    from spark_stream_sched.inputs import write_inputs
    from spark_stream_sched.jobs.runner import order_modification_times

    dirs = write_inputs(tables, root, "parquet", files_per_input)
    order_modification_times(dirs)
    return dirs


def start_sink_query(spark: Any, dirs: list[Path], schema: pa.Schema, opts: dict[str, str],
                     files_per_trigger: int) -> Any:
    from spark_stream_sched.jobs.runner import file_streams

    frame = file_streams(spark, dirs, "parquet", schema, files_per_trigger, with_position=True)
    frame = frame.drop("dc").withColumnRenamed("input_id", "dc")
    return (frame.writeStream.format("ordered-agg").options(**opts)
            .trigger(availableNow=True).start())


@pytest.mark.spark
def test_spark_stream_equals_reference_and_replay_is_ignored(spark: Any, tmp_path: Path) -> None:
    register(spark)
    tables = make_inputs(rows=2_000)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=3)
    opts = options(tmp_path, sequenceColumn=SEQUENCE_COLUMN)
    query = start_sink_query(spark, dirs, tables[0].schema, opts, files_per_trigger=1)
    query.awaitTermination()
    assert query.exception() is None
    spark_commits = tmp_path / "ck" / "commits"
    last = max(int(p.name) for p in spark_commits.iterdir() if p.name.isdigit())
    assert last >= 2, "maxFilesPerTrigger=1 gives several micro-batches"
    outputs = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}

    # Forget Spark's commit of the last batch: the restarted query runs that batch id again.
    (spark_commits / str(last)).unlink()
    (spark_commits / f".{last}.crc").unlink(missing_ok=True)
    replay = start_sink_query(spark, dirs, tables[0].schema, opts, files_per_trigger=1)
    replay.awaitTermination()
    assert replay.exception() is None
    assert [p["batchId"] for p in replay.recentProgress][:1] == [last]
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == outputs

    sink.finish_sink(opts)
    rows = output_rows(tmp_path / "out")
    assert rows == expected_rows(tables)
    assert len(set(rows)) == len(rows)


@pytest.mark.spark
def test_spark_sink_rejects_bad_options_at_start(spark: Any, tmp_path: Path) -> None:
    register(spark)
    tables = make_inputs(rows=300)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=1)
    opts = options(tmp_path, keyColumns="no_such_column", sequenceColumn=SEQUENCE_COLUMN)
    query = start_sink_query(spark, dirs, tables[0].schema, opts, files_per_trigger=1)
    with pytest.raises(Exception, match="option keyColumns|no_such_column"):
        query.awaitTermination()
    assert not os.path.exists(tmp_path / "out")


def test_an_input_that_stops_is_idle_after_idle_timeout(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A quiet input (a Kafka partition that stops) no longer holds every window back.

    Input 2 sends rows only in batch 0. Each commit happens 2 s (driver clock) after the last:
    from the commit that finds input 2 quiet for ``idleTimeout`` on, the next batches release
    the windows after input 2's last row, as the source's ``idleTimeout`` does; nothing is lost
    or repeated (the oracle, after ``finish_sink``).
    """
    from spark_stream_sched.runtime.engine import sink_commit

    tables = make_inputs()
    quiet = tables[2].slice(0, 200)
    inputs = [tables[0], tables[1], quiet]
    opts = options(tmp_path, idleTimeout="3 seconds")
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks, clock = FakeTasks(monkeypatch, writer), [1000.0]
    monkeypatch.setattr(sink_commit, "wall_clock", lambda: clock[0])
    batches = batches_of([tables[0], tables[1]], 5, 2, seed=3)
    batches[0] = [pa.concat_tables([batches[0][0], quiet]), batches[0][1]]
    for batch_id, partitions in enumerate(batches):
        clock[0] += 2.0
        writer.commit(tasks.write(batch_id, partitions), batch_id)
    last_quiet = int(quiet.column("ts")[-1].as_py())
    markers = sink.read_commits(writer.config)
    # quiet for 2 s after batch 1's commit, 4 s after batch 2's: idle from batch 3 on
    assert [m["idle_next"][2] for m in markers] == [False, False, True, True, True]
    assert markers[-1]["ready_bound"] > last_quiet  # input 2 holds R back no more
    emitted = output_rows(tmp_path / "out")
    assert max(r[1] for r in emitted) > last_quiet + 20_000
    sink.finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(inputs)
