"""The sink's work runs in its write tasks; the driver only keeps books.

Driver-side tests call the writer's ``write``/``commit`` directly with a faked task identity
(``write`` runs the groups as it does on an executor); the ``spark`` test runs a real stream
through :func:`~spark_stream_sched.spark.sink.partition_for_sink`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.engine.sink_config import (
    GROUP_FUNCTION,
    SinkConfig,
    recorded_group_function,
)
from spark_stream_sched.spark import sink
from tests.spark.test_sink import (
    FakeTasks,
    batches_of,
    expected_rows,
    make_inputs,
    options,
    output_rows,
)


def by_group(config: sink.SinkConfig, rows: pa.Table, n_tasks: int) -> list[pa.Table]:
    """Rows split over ``n_tasks`` so that every partition group reaches exactly one task."""
    groups = group_of_rows(rows, config.spec.key_columns, config.spec.partition_groups,
                           config.spec.group_function)
    return [rows.filter(pa.array(groups % n_tasks == t)) for t in range(n_tasks)]


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: list[list[pa.Table]],
        **extra: str) -> list[dict[str, Any]]:
    opts = options(tmp_path, **extra)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    for batch_id, partitions in enumerate(batches):
        writer.commit(tasks.write(batch_id, partitions), batch_id)
    sink.finish_sink(opts)
    return sink.read_commits(writer.config)


def part_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.glob("part-*.parquet"))}


def test_groups_partitioned_by_task_run_without_the_driver(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = make_inputs()
    config = sink.parse_sink_options(options(tmp_path))
    batches = [by_group(config, pa.concat_tables(b), 3) for b in batches_of(tables, 5, 1, seed=3)]
    records = run(tmp_path / "a", monkeypatch, batches)
    assert output_rows(tmp_path / "a" / "out") == expected_rows(tables)
    streaming = [r for r in records if r["batch_id"] != "final"]
    assert all(r["groups_on_driver"] == 0 and r["rows_on_driver"] == 0 for r in streaming)
    assert sum(r["tasks_cpu_s"] for r in streaming) > 0
    # the same rows spread at random over the tasks: the driver merges the split groups,
    # and every batch's file is byte-identical
    spread = batches_of(tables, 5, 3, seed=3)
    records_spread = run(tmp_path / "b", monkeypatch, spread)
    assert any(r.get("groups_on_driver") for r in records_spread)
    assert part_files(tmp_path / "a" / "out") == part_files(tmp_path / "b" / "out")


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n_batches=st.integers(1, 6), n_tasks=st.integers(1, 4), grouped=st.booleans(),
       groups=st.sampled_from([1, 3, 16]), seed=st.integers(0, 10_000))
def test_any_batching_and_task_split_equals_the_oracle(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        n_batches: int, n_tasks: int, grouped: bool, groups: int, seed: int) -> None:
    tables = make_inputs(rows=400, seed=seed)
    root = tmp_path_factory.mktemp("sink")
    config = sink.parse_sink_options(options(root, partitionGroups=str(groups)))
    batches = batches_of(tables, n_batches, n_tasks, seed=seed)
    if grouped:
        batches = [by_group(config, pa.concat_tables(b), n_tasks) for b in batches]
    records = run(root, monkeypatch, batches, partitionGroups=str(groups))
    if grouped:
        assert all(r.get("rows_on_driver", 0) == 0 for r in records)
    assert output_rows(root / "out") == expected_rows(tables)


def stream_schema(tables: list[pa.Table]) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(tables[0].schema)


def with_text_meters(tables: list[pa.Table]) -> list[pa.Table]:
    """``tables`` with the meter key as text (``"MTR-…"``, multi-byte characters included)."""
    index = tables[0].schema.get_field_index("meter")
    return [t.set_column(index, "meter", pa.array(
        [f"MTR-{m}" + "é€😀"[: m % 4] for m in t.column("meter").to_pylist()]))
        for t in tables]


@pytest.mark.parametrize("kind", ["bigint", "string"])
def test_a_new_state_groups_its_keys_by_sparks_hash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    tables = make_inputs() if kind == "bigint" else with_text_meters(make_inputs())
    opts = options(tmp_path)  # keyColumns=meter
    writer = sink.make_stream_writer(opts, stream_schema(tables))
    assert writer.config.spec.group_function == "murmur3"
    tasks = FakeTasks(monkeypatch, writer)
    for batch_id, b in enumerate(batches_of(tables, 4, 1, seed=2)):
        writer.commit(tasks.write(batch_id, by_group(writer.config, pa.concat_tables(b), 3)),
                      batch_id)
    sink.finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(tables)
    records = [r for r in sink.read_commits(writer.config) if r["batch_id"] != "final"]
    assert all(r["groups_on_driver"] == 0 and r["rows_in"] for r in records), records
    assert recorded_group_function(writer.config.state_location) == "murmur3"


def test_a_state_started_before_group_functions_keeps_splitmix64(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first two batches as an earlier version wrote them: no groupFunction in _query.json
    tables = make_inputs()
    opts = options(tmp_path)
    batches = batches_of(tables, 5, 1, seed=4)
    old = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    assert old.config.spec.group_function == "splitmix64"
    wiring = SinkConfig.wiring
    with monkeypatch.context() as patch:
        patch.setattr(SinkConfig, "wiring", lambda self: {
            k: v for k, v in wiring(self).items() if k != GROUP_FUNCTION})
        tasks = FakeTasks(patch, old)
        for batch_id in (0, 1):
            old.commit(tasks.write(batch_id, by_group(old.config, pa.concat_tables(
                batches[batch_id]), 3)), batch_id)
    location = old.config.state_location
    assert GROUP_FUNCTION not in (tmp_path / "ck" / "ordered-agg-sink" / "_query.json"
                                  ).read_text()
    assert recorded_group_function(location) == "splitmix64"
    # restarted by this version: the writer keeps the state's groups
    writer = sink.make_stream_writer(opts, stream_schema(tables))
    assert writer.config.spec.group_function == "splitmix64"
    tasks = FakeTasks(monkeypatch, writer)
    for batch_id in (2, 3, 4):
        writer.commit(tasks.write(batch_id, by_group(writer.config, pa.concat_tables(
            batches[batch_id]), 3)), batch_id)
    sink.finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(tables)
    records = [r for r in sink.read_commits(writer.config) if r["batch_id"] != "final"]
    assert len(records) == 5
    assert all(r["groups_on_driver"] == 0 for r in records), records
    # a writer that would group keys otherwise is refused before it touches the state
    config = sink.parse_sink_options(opts)
    murmur = replace(config, spec=replace(config.spec, group_function="murmur3"))
    with pytest.raises(StateError, match="partition groups by splitmix64, but this writer "
                                         "would use murmur3"):
        sink.SinkCommitter(murmur).claim()


def sequenced(ts: list[int], seq: list[int], meter: list[str] | None = None) -> pa.Table:
    n = len(ts)
    return pa.table({"ts": pa.array(ts, pa.int64()), "meter": meter or ["m1"] * n,
                     "value": pa.array([1.0] * n), "kind": ["reading"] * n,
                     "dc": pa.array([0] * n, pa.int32()), "pos": pa.array(seq, pa.int64())})


def seq_options(tmp_path: Path, **extra: str) -> dict[str, str]:
    return options(tmp_path, n_inputs=1, sequenceColumn="pos", **extra)


def test_decreasing_ts_along_the_sequence_column_fails_naming_input_sequence_and_ts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = seq_options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    rows = sequenced([5000, 1000, 3000], [0, 1, 2])
    with pytest.raises(InputError, match=r"input 0 is out of order along 'pos': pos 1 has ts "
                                         r"1000 after ts 5000 at pos 0"):
        writer.commit(tasks.write(0, [rows]), 0)
    assert not list((tmp_path / "out").glob("part-*")) if (tmp_path / "out").exists() else True


def test_out_of_order_rows_in_different_tasks_and_groups_are_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = seq_options(tmp_path)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    rows = sequenced([5000, 1000, 3000], [0, 1, 2], meter=["m1", "m2", "m3"])
    parts = [rows.slice(0, 1), rows.slice(1, 1), rows.slice(2, 1)]
    with pytest.raises(InputError, match=r"pos 1 has ts 1000 after ts 5000 at pos 0"):
        writer.commit(tasks.write(0, parts), 0)


def test_drop_policy_drops_and_counts_rows_below_the_running_maximum(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = seq_options(tmp_path, outOfOrder="drop")
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    rows = sequenced([5000, 1000, 3000, 6000], [0, 1, 2, 3], meter=["m1", "m2", "m1", "m2"])
    writer.commit(tasks.write(0, [rows.slice(0, 2), rows.slice(2, 2)]), 0)
    final = sink.finish_sink(opts)
    assert final is not None
    assert final["dropped"] == 2
    out = output_rows(tmp_path / "out")
    assert sum(r[3] for r in out) == 2 * 4  # two rows kept, each in 20 s / 5 s = 4 windows
    assert {(r[2], r[7]) for r in out} == {("m1", 5000), ("m2", 6000)}


def test_rows_of_one_input_across_batches_must_not_go_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = options(tmp_path, n_inputs=1)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    writer.commit(tasks.write(0, [sequenced([5000, 6000], [0, 1]).drop_columns(["pos"])]), 0)
    with pytest.raises(InputError, match=r"input 0 sent ts 1000 after ts 6000 in an earlier "
                                         r"batch"):
        writer.commit(tasks.write(1, [sequenced([1000], [2]).drop_columns(["pos"])]), 1)


@pytest.mark.spark
@pytest.mark.parametrize("shuffle_partitions", [1, 2, 4])
def test_spark_stream_partitioned_for_the_sink_runs_on_the_executors(
        spark: Any, tmp_path: Path, shuffle_partitions: int) -> None:
    tables = make_inputs(rows=600)
    source = tmp_path / "in"
    source.mkdir()
    rows = pa.concat_tables(tables)
    for b, piece in enumerate(batches_of(tables, 3, 1, seed=5)):
        pq.write_table(pa.concat_tables(piece), source / f"b{b}.parquet")
        os.utime(source / f"b{b}.parquet", (1_000_000 + b, 1_000_000 + b))  # admitted in order
    stream = (spark.readStream.schema(spark.createDataFrame(rows.slice(0, 1).to_pandas()).schema)
              .option("maxFilesPerTrigger", 1).parquet(str(source)))
    opts = options(tmp_path)
    grouped = sink.partition_for_sink(stream, opts, partitions=shuffle_partitions)
    query = grouped.writeStream.format("ordered-agg").options(**opts).start()
    query.processAllAvailable()
    query.stop()
    sink.finish_sink(opts)
    assert output_rows(tmp_path / "out") == expected_rows(tables)
    observed = [p["observedMetrics"] for p in query.recentProgress]
    assert sum(m[sink.PARTITIONED_ROWS]["rows"] for m in observed if m) == rows.num_rows
    records = [r for r in sink.read_commits(sink.parse_sink_options(opts))
               if r["batch_id"] != "final"]
    assert len(records) == 3
    assert all(r["groups_on_driver"] == 0 for r in records), records
    # a new state of integer keys: Spark routed by its own hash, the tasks grouped alike
    assert recorded_group_function(sink.parse_sink_options(opts).state_location) == "murmur3"
    assert sum(r["tasks"] for r in records) >= 3
    np.testing.assert_array_less(0, [r["tasks_cpu_s"] for r in records if r["rows_in"]])
