"""``ordered(...).window(...).agg(...)`` in transformWithStateInPandas equals the oracle.

Inputs are Parquet file streams read by Spark's own file source, one stream per input, with an
explicit position column as the sequence and, where the test says so, a last file holding one
end-of-input row. File modification times are set in stream order, because Spark's file source
picks files by modification time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.spark.transform import configure, ordered
from spark_stream_sched.spark.transform_processor import from_ipc
from spark_stream_sched.testing.pipeline_reference import reference_pipeline
from spark_stream_sched.testing.reference import reference_aggregate

from .datagen import make_stream
from .helpers import (
    AGGREGATES,
    SLIDE,
    WINDOW,
    assert_matches_oracle,
    kill_after_batches,
    output_key,
)

pytestmark = pytest.mark.spark
N_INPUTS = 3
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_files(root: str, ts_type: str = "int64", rows: int = 150, files: int = 3,
                end_marker: bool = True, seed: int = 7) -> list[pa.Table]:
    """Inputs ``root/in<j>`` in ``files + j`` Parquet files (+ an end file); their tables."""
    tables = [make_stream(seed, j, rows + 23 * j, ts_type=ts_type) for j in range(N_INPUTS)]
    mtime = 1_700_000_000
    for j, table in enumerate(tables):
        n = table.num_rows
        table = table.append_column("pos", pa.array(range(n), pa.int64()))
        table = table.append_column("eof", pa.array([False] * n))
        parts = [table.slice(i * n // (files + j), (i + 1) * n // (files + j) - i * n // (
            files + j)) for i in range(files + j)]
        if end_marker:
            parts.append(table.slice(n - 1, 1).set_column(
                table.schema.get_field_index("eof"), "eof", pa.array([True])))
        os.makedirs(os.path.join(root, f"in{j}"))
        for i, part in enumerate(parts):
            path = os.path.join(root, f"in{j}", f"part-{i:04d}.parquet")
            pq.write_table(part, path)
            mtime += 10
            os.utime(path, (mtime, mtime))
    return tables


def streams(spark: Any, root: str, max_files: int) -> list[Any]:
    """One Spark file stream per input (schema from the first file)."""
    schema = spark.read.parquet(os.path.join(root, "in0")).schema
    return [spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files)
            .parquet(os.path.join(root, f"in{j}")) for j in range(N_INPUTS)]


def query(spark: Any, root: str, max_files: int, end_of_input: str | None = "eof") -> Any:
    """The windowed query of the tests over the inputs under ``root``."""
    configure(spark)
    return (ordered(streams(spark, root, max_files), sequence="pos", timestamp="ts",
                    keys=["meter"], end_of_input=end_of_input)
            .window(WINDOW, SLIDE).agg(*_split(AGGREGATES)))


def run(spark: Any, root: str, checkpoint: str, max_files: int = 1,
        end_of_input: str | None = "eof") -> list[tuple[int, list[dict[str, Any]]]]:
    """Run the windowed query to the end (availableNow); return (batch id, rows) per batch."""
    batches: list[tuple[int, list[dict[str, Any]]]] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, sorted([r.asDict() for r in df.collect()], key=output_key)))

    started = (query(spark, root, max_files, end_of_input).writeStream.foreachBatch(collect)
               .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    started.awaitTermination(timeout=300)
    assert started.exception() is None
    return batches


def _split(aggregates: str) -> list[str]:
    """The helpers' aggregate list (one string, top-level commas) as separate arguments."""
    parts, depth, current = [], 0, ""
    for ch in aggregates:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return [*parts, current.strip()]


def oracle(tables: list[pa.Table]) -> list[dict[str, Any]]:
    return reference_aggregate(tables, WindowSpec.parse(WINDOW, SLIDE), ["meter"], AGGREGATES)


def flat(batches: list[tuple[int, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Rows in batch order; within a batch by (window_end, window_start, key)."""
    return [row for _, rows in sorted(batches, key=lambda b: b[0]) for row in rows]


@pytest.mark.parametrize(("max_files", "partitions", "ts_type"),
                         [(1, 1, "int64"), (100, 2, "timestamp"), (2, 4, "int64")])
def test_equals_oracle(spark: Any, tmp_path: Any, max_files: int, partitions: int,
                       ts_type: str) -> None:
    """Any batching, any shuffle partition count, long or timestamp event time: the oracle."""
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    try:
        tables = write_files(str(tmp_path / "in"), rows=120, files=2, ts_type=ts_type)
        batches = run(spark, str(tmp_path / "in"), str(tmp_path / "ck"), max_files)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
    actual = flat(batches)
    if ts_type == "timestamp":
        assert all(isinstance(r["window_end"], datetime) for r in actual)
        actual = [{**r, "window_start": _ms(r["window_start"]), "window_end": _ms(r["window_end"])}
                  for r in actual]
    assert_matches_oracle(actual, oracle(tables))
    # windows leave in (window_end, window_start, key) order across batches, once each
    assert [output_key(r) for r in actual] == sorted(output_key(r) for r in actual)
    if max_files == 1:
        assert sum(1 for _, rows in batches if rows) > 1  # output spread over batches


def _ms(value: datetime) -> int:
    """Milliseconds of a timestamp as pyspark collects it (naive, in local time)."""
    return round(value.timestamp() * 1000)


def test_without_end_marker_exactly_the_closed_windows(spark: Any, tmp_path: Any) -> None:
    """No end of input: the windows with window_end <= R = min_j latest_j, no more, no less.

    The open windows and unreleased rows stay in Spark's state store, readable with Spark's
    ``statestore`` and ``state-metadata`` sources.
    """
    tables = write_files(str(tmp_path / "in"), end_marker=False)
    checkpoint = str(tmp_path / "ck")
    actual = flat(run(spark, str(tmp_path / "in"), checkpoint, max_files=100,
                      end_of_input=None))
    bound = min(int(pa.compute.max(t.column("ts")).as_py()) for t in tables)
    expected = [r for r in oracle(tables) if r["window_end"] <= bound]
    assert 0 < len(expected) < len(oracle(tables))
    assert_matches_oracle(actual, expected)

    metadata = spark.read.format("state-metadata").load(checkpoint).collect()
    assert [r.operatorName for r in metadata] == ["applyInPandasWithState"]
    state = spark.read.format("statestore").load(checkpoint)
    rows = [(r.key[0], r.value.groupState) for r in state.collect()]
    groups = {group for group, _ in rows}
    assert groups <= set(range(16))
    assert len(groups) > 1
    assert all(v.pending is not None and v.operator for _, v in rows)
    assert sum(from_ipc(bytes(v.pending)).num_rows for _, v in rows) > 0  # not yet ready


def test_a_window_query_keeps_only_the_columns_it_reads(spark: Any, tmp_path: Any) -> None:
    """Windows that read neither ``kind`` nor ``eof`` do not carry them into the operator or
    its pending state; the results equal the oracle's closed windows."""
    tables = write_files(str(tmp_path / "in"), end_marker=False, files=2)
    checkpoint = str(tmp_path / "ck")
    aggregates = ("count(*) as n", "first(value) as first_v")
    configure(spark)
    out = (ordered(streams(spark, str(tmp_path / "in"), 100), sequence="pos", keys=["meter"])
           .window(WINDOW, SLIDE).agg(*aggregates))
    batches: list[list[dict[str, Any]]] = []
    started = (out.writeStream.foreachBatch(lambda df, _: batches.append(
        sorted([r.asDict() for r in df.collect()], key=output_key)))
        .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    started.awaitTermination(timeout=300)
    assert started.exception() is None
    bound = min(int(pa.compute.max(t.column("ts")).as_py()) for t in tables)
    expected = [r for r in reference_aggregate(tables, WindowSpec.parse(WINDOW, SLIDE),
                                               ["meter"], ", ".join(aggregates))
                if r["window_end"] <= bound]
    assert len(expected) > 0
    assert_matches_oracle([r for b in batches for r in b], expected)
    state = spark.read.format("statestore").load(checkpoint)
    pending = [from_ipc(bytes(r.value.groupState.pending)) for r in state.collect()]
    assert sum(t.num_rows for t in pending) > 0
    # the payload the windows read and the input id; the position ``__seq`` is ``pos`` again
    # when loaded, so it is not stored twice
    assert {tuple(t.schema.names) for t in pending} == {("ts", "meter", "value", "pos",
                                                         "__input")}


SESSION_AGGREGATES = ("count(*) as n", "first(value) as first_v", "last(value) as last_v",
                      "max(value) as hi")


@pytest.mark.parametrize("stage", ["sessionize(2 seconds)", "delta(value) as change"])
def test_keyed_operators_equal_the_pipeline_oracle(spark: Any, tmp_path: Any, stage: str) -> None:
    """Sessions (closing operator) and rows (row operator) over several batches."""
    root = str(tmp_path / "in")
    tables = write_files(root, rows=100, files=2)
    closing = stage.startswith("sessionize")
    aggregates = SESSION_AGGREGATES if closing else ()
    configure(spark)
    keyed = ordered(streams(spark, root, 1), sequence="pos", keys=["meter"],
                    end_of_input="eof").operators(stage)
    out = keyed.agg(*aggregates) if closing else keyed.rows()
    batches: list[list[dict[str, Any]]] = []
    started = (out.writeStream.foreachBatch(lambda df, _: batches.append(
        [r.asDict() for r in df.collect()])).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start())
    started.awaitTermination(timeout=300)
    assert started.exception() is None
    spec = QuerySpec(n_inputs=N_INPUTS, window_ms=0, slide_ms=0, aggregates=aggregates,
                     key_columns=("meter",), operators=(stage,))
    with_pos = [t.append_column("pos", pa.array(range(t.num_rows), pa.int64())) for t in tables]
    expected = reference_pipeline(with_pos, spec)
    order = ((lambda r: (r["session_end"], r["session_start"], r["meter"])) if closing else
             (lambda r: (r["meter"], r["pos"], r["ts"])))
    actual = [row for rows in batches for row in rows]
    assert len(expected) >= 10
    assert sorted(actual, key=order) == sorted(expected, key=order)


def test_row_below_the_released_bound_fails_the_query(spark: Any, tmp_path: Any) -> None:
    """A row of a later file below what its group already released: the query stops."""
    root = str(tmp_path / "in")
    tables = write_files(root, rows=60, files=2, end_marker=False)
    late = tables[0].slice(0, 1).append_column("pos", pa.array([10_000], pa.int64()))
    late = late.append_column("eof", pa.array([False]))
    path = os.path.join(root, "in0", "part-9999.parquet")
    pq.write_table(late, path)
    os.utime(path, (1_800_000_000, 1_800_000_000))
    started = (query(spark, root, max_files=1, end_of_input=None).writeStream
               .foreachBatch(lambda df, _: df.collect())
               .option("checkpointLocation", str(tmp_path / "ck"))
               .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="ordered\\(\\): input 0 is out of order along 'pos': pos "
                       "10000 has ts"):
        started.awaitTermination(timeout=300)


def write_going_back(root: str) -> None:
    """Input 0: ``part-a`` (ts 0-49 s) then ``part-b`` (ts 10-19 s, back along the sequence);
    input 1 in order (0-59 s); each input ends with an end-of-input row."""
    def part(ts_s: range, pos: int, input_dir: str, name: str, stamp: int) -> None:
        n = len(ts_s)
        table = pa.table({"ts": pa.array([t * 1000 for t in ts_s], pa.int64()),
                          "meter": pa.array([f"k{t % 3}" for t in ts_s]),
                          "value": pa.array([float(t) for t in ts_s]),
                          "kind": pa.array(["ok"] * n),
                          "pos": pa.array(range(pos, pos + n), pa.int64()),
                          "eof": pa.array([False] * n)})
        os.makedirs(os.path.join(root, input_dir), exist_ok=True)
        path = os.path.join(root, input_dir, name)
        pq.write_table(table, path)
        os.utime(path, (stamp, stamp))

    part(range(0, 50), 0, "in0", "part-a.parquet", 1_700_000_000)
    part(range(10, 20), 50, "in0", "part-b.parquet", 1_700_000_010)
    part(range(0, 60), 0, "in1", "part-a.parquet", 1_700_000_000)
    for j, (ts, pos) in enumerate([(19, 60), (59, 60)]):
        end = pa.table({"ts": [ts * 1000], "meter": ["k0"], "value": [0.0], "kind": ["ok"],
                        "pos": pa.array([pos], pa.int64()), "eof": [True]})
        path = os.path.join(root, f"in{j}", "part-z.parquet")
        pq.write_table(end, path)
        os.utime(path, (1_700_000_100, 1_700_000_100))


def going_back_query(spark: Any, root: str, max_files: int, policy: str) -> Any:
    configure(spark)
    schema = spark.read.parquet(os.path.join(root, "in0")).schema
    inputs = [spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files)
              .parquet(os.path.join(root, f"in{j}")) for j in range(2)]
    return (ordered(inputs, sequence="pos", keys=["meter"], end_of_input="eof",
                    out_of_order=policy).window("10 seconds").agg("count(*) as n"))


@pytest.mark.parametrize("max_files", [1, 10])
def test_an_input_going_back_along_its_sequence_fails_in_every_batching(
        spark: Any, tmp_path: Any, max_files: int) -> None:
    """Whether part-b arrives before or after the windows it falls in are released."""
    root = str(tmp_path / "in")
    write_going_back(root)
    started = (going_back_query(spark, root, max_files, "fail").writeStream.format("parquet")
               .option("path", str(tmp_path / "out"))
               .option("checkpointLocation", str(tmp_path / "ck"))
               .trigger(availableNow=True).start())
    with pytest.raises(Exception) as failure:
        started.awaitTermination(timeout=300)
    first = str(failure.value).strip().splitlines()[0]
    assert ("InputError: ordered(): input 0 is out of order along 'pos': pos 50 has ts 10000 "
            "after ts 49000 earlier in the input") in first, first
    assert "Traceback" not in first


def test_an_input_going_back_along_its_sequence_drops_the_same_rows_in_every_batching(
        spark: Any, tmp_path: Any) -> None:
    root = str(tmp_path / "in")
    write_going_back(root)
    results = []
    for max_files in (1, 10):
        batches: list[tuple[int, list[dict[str, Any]]]] = []

        def collect(df: Any, batch_id: int, into: list[Any] = batches) -> None:
            into.append((batch_id, [r.asDict() for r in df.collect()]))

        started = (going_back_query(spark, root, max_files, "drop").writeStream
                   .foreachBatch(collect)
                   .option("checkpointLocation", str(tmp_path / f"ck{max_files}"))
                   .trigger(availableNow=True).start())
        started.awaitTermination(timeout=300)
        assert started.exception() is None
        results.append(sorted(((r["window_start"], r["meter"], r["n"]) for _, b in batches
                               for r in b)))
    assert results[0] == results[1]
    # part-b's ten rows are dropped: window [10 s, 20 s) holds input 0's part-a rows and input 1's
    assert sum(n for start, _, n in results[0] if start == 10_000) == 20


def driver_main(root: str, checkpoint: str, out: str) -> None:
    """Driver process of the restart test: each batch to ``out/batch-<id>.parquet``, sorted."""
    from pyspark.sql import SparkSession

    from spark_stream_sched.runtime.state.atomic import atomic_writer

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    os.makedirs(out, exist_ok=True)

    def write_batch(df: Any, batch_id: int) -> None:
        table = df.toArrow().sort_by([("window_end", "ascending"),
                                      ("window_start", "ascending"), ("meter", "ascending")])
        with atomic_writer(os.path.join(out, f"batch-{batch_id:05d}.parquet")) as tmp:
            pq.write_table(table, tmp)
        print(f"BATCH {batch_id}", flush=True)

    started = (query(spark, root, max_files=1).writeStream.foreachBatch(write_batch)
               .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    started.awaitTermination()
    print("DONE", flush=True)


def _driver(root: str, checkpoint: str, out: str) -> subprocess.Popen[str]:
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": REPO}
    code = ("import sys; from tests.spark.test_transform import driver_main; "
            "driver_main(*sys.argv[1:4])")
    return subprocess.Popen([sys.executable, "-c", code, root, checkpoint, out], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)


@pytest.mark.slow
def test_sigkill_mid_run_then_restart_is_exactly_once(tmp_path: Any) -> None:
    """Kill driver, JVM and workers after batch 1; the restart on the checkpoint completes it."""
    root, checkpoint, out = (str(tmp_path / n) for n in ("in", "ck", "out"))
    tables = write_files(root, rows=100, files=1)
    seen = kill_after_batches(_driver(root, checkpoint, out), 2, group=True)
    assert seen == ["BATCH 0", "BATCH 1"]
    second = _driver(root, checkpoint, out)
    stdout, _ = second.communicate(timeout=300)
    assert second.returncode == 0
    assert "DONE" in stdout
    assert "BATCH 0" not in stdout  # resumed from the checkpoint, not started afresh
    names = sorted(n for n in os.listdir(out) if n.endswith(".parquet"))
    rows = pa.concat_tables([pq.read_table(os.path.join(out, n)) for n in names]).to_pylist()
    assert_matches_oracle(rows, oracle(tables))  # no row lost, none twice, same values


def test_the_package_exports_the_transformation_lazily() -> None:
    import spark_stream_sched.spark as package
    from spark_stream_sched.spark import transform

    assert package.ordered is transform.ordered
    assert package.configure is transform.configure
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.nothing  # noqa: B018


@pytest.mark.slow
def test_changed_definition_on_restart_is_refused(spark: Any, tmp_path: Any) -> None:
    """State written by one window definition is never merged into another's."""
    root, checkpoint = str(tmp_path / "in"), str(tmp_path / "ck")
    write_files(root, rows=90, files=2, end_marker=False)
    held = tmp_path / "held"
    held.mkdir()
    for j in range(N_INPUTS):  # the last file of every input arrives after the restart
        last = sorted(os.listdir(os.path.join(root, f"in{j}")))[-1]
        os.rename(os.path.join(root, f"in{j}", last), held / f"{j}-{last}")
    run(spark, root, checkpoint, max_files=10, end_of_input=None)
    for j in range(N_INPUTS):
        for name in sorted(p.name for p in held.iterdir() if p.name.startswith(f"{j}-")):
            target = os.path.join(root, f"in{j}", name.split("-", 1)[1])
            os.rename(held / name, target)
            os.utime(target, (1_800_000_000, 1_800_000_000))
    configure(spark)
    changed = (ordered(streams(spark, root, 10), sequence="pos", timestamp="ts", keys=["meter"])
               .window("20 seconds", "10 seconds").agg(*_split(AGGREGATES)))
    started = (changed.writeStream.foreachBatch(lambda df, batch_id: df.count())
               .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="written by another query definition"):
        started.awaitTermination(timeout=300)


def test_spark_file_positions_as_the_sequence(spark: Any, tmp_path: Any) -> None:
    """The position a user builds from Spark's own file metadata (``file#row`` text, which
    Spark declares non-nullable) orders each input, over several micro-batches.

    Pending rows keep it as ``__seq`` across batches; a check that compared the nullability of
    the pending rows' columns with Spark's schema refused the state of the second batch.
    """
    from pyspark.sql import functions as F  # noqa: N812

    tables = write_files(str(tmp_path / "in"), rows=120, files=3)
    configure(spark)
    inputs = [df.withColumn("position", F.concat_ws(
        "#", F.col("_metadata.file_name"),
        F.lpad(F.col("_metadata.row_index").cast("string"), 19, "0")))
        for df in streams(spark, str(tmp_path / "in"), 1)]
    assert not inputs[0].schema["position"].nullable
    out = (ordered(inputs, sequence="position", timestamp="ts", keys=["meter"],
                   end_of_input="eof").window(WINDOW, SLIDE).agg(*_split(AGGREGATES)))
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    started = (out.writeStream.foreachBatch(lambda df, b: batches.append(
        (b, sorted([r.asDict() for r in df.collect()], key=output_key))))
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    started.awaitTermination(timeout=300)
    assert started.exception() is None
    assert sum(1 for _, rows in batches if rows) > 1
    assert_matches_oracle(flat(batches), oracle(tables))
