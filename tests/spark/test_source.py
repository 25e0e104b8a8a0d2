"""The ordered-agg source in a real local[2] Spark: oracle, batching, errors, registration.

No test here calls ``register()`` except the last one: the format is found through the installed
top-level module ``pyspark_ordered_agg`` (other test modules of the session may register it
explicitly too; ``test_registration.py`` checks the lookup itself without a JVM).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pyarrow.parquet as pq
import pytest

from .datagen import make_stream
from .helpers import (
    assert_matches_oracle,
    expected_rows,
    flatten,
    output_key,
    run_available_now,
    source_options,
    start_query,
    write_inputs,
)

pytestmark = pytest.mark.spark


def test_format_resolves_and_declares_the_result_schema(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=20)
    df = spark.readStream.format("ordered-agg").options(
        **source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"))).load()
    assert df.isStreaming
    assert df.columns[:3] == ["window_start", "window_end", "meter"]
    assert dict(df.dtypes)["window_start"] == "bigint"
    assert dict(df.dtypes)["first_v"] == "double"
    assert dict(df.dtypes)["n"] == "bigint"


def test_output_equals_oracle_and_is_identical_for_any_batch_size(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=400)
    outputs = {}
    for limit in (0, 173, 600):
        opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / f"state-{limit}"),
                              maxRecordsPerTrigger=limit, partitionGroups=8)
        batches = run_available_now(spark, opts, str(tmp_path / f"ckpt-{limit}"))
        data_batches = [b for b in batches if b[1]]
        total = sum(t.num_rows for t in tables)
        if limit:
            assert len(batches) >= -(-total // limit)  # admission control split the input
        else:
            assert len(data_batches) == 1
        outputs[limit] = flatten(batches)
    assert outputs[173] == outputs[0]  # bit-identical: values, floats and row order
    assert outputs[600] == outputs[0]
    assert_matches_oracle(outputs[0], expected_rows(tables))


def test_timestamp_event_time_gives_timestamp_windows(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=2, rows=150, ts_type="timestamp")
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "s"),
                          maxRecordsPerTrigger=100)
    df = spark.readStream.format("ordered-agg").options(**opts).load()
    assert dict(df.dtypes)["window_start"] == "timestamp"
    rows = flatten(run_available_now(spark, opts, str(tmp_path / "ckpt")))
    for row in rows:
        for name in ("window_start", "window_end"):
            row[name] = int(row[name].timestamp() * 1000)
    assert_matches_oracle(sorted(rows, key=output_key), expected_rows(tables))


def test_new_files_are_picked_up_by_later_batches(spark, tmp_path) -> None:
    whole = [make_stream(7, j, 200) for j in range(2)]
    for j, table in enumerate(whole):
        os.makedirs(tmp_path / f"in{j}")
        pq.write_table(table.slice(0, 100), tmp_path / f"in{j}" / "part-000.parquet")
    opts = source_options(str(tmp_path), 2, str(tmp_path / "s"), endOfInput="never")
    sink: list[Any] = []
    query = start_query(spark, opts, str(tmp_path / "ckpt"), sink, available_now=False)
    try:
        query.processAllAvailable()
        before = len(flatten(sink))
        for j, table in enumerate(whole):
            pq.write_table(table.slice(100), tmp_path / f"in{j}" / "part-001.parquet")
        query.processAllAvailable()
    finally:
        query.stop()
    rows = flatten(sink)
    bound = min(int(t.column("ts")[-1].as_py()) for t in whole)
    closed = [r for r in expected_rows(whole) if r["window_end"] <= bound]
    assert 0 < before < len(rows)
    assert_matches_oracle(rows, closed)


@pytest.mark.parametrize(("option", "value", "message"), [
    ("maxRecordsPerTriger", "5", "did you mean 'maxRecordsPerTrigger'"),
    ("aggregates", "first(nope) as f", "unknown column"),
    ("window", "ten seconds", "option window='ten seconds'"),
    ("keyColumns", "missing_key", "column 'missing_key' not found"),
])
def test_bad_options_fail_when_the_query_is_defined(spark, tmp_path, option: str, value: str,
                                                    message: str) -> None:
    write_inputs(str(tmp_path / "in"), rows=10)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s")) | {option: value}
    with pytest.raises(Exception, match=message):
        spark.readStream.format("ordered-agg").options(**opts).load()


def test_missing_state_location_is_named(spark, tmp_path) -> None:
    """A stream needs stateLocation (a batch read does not, so load() cannot tell).

    The error comes from the query's first planning step, before any data moves, with our
    message first — not pyspark's ``UnboundLocalError: ... 'reader'``, which is what an error
    raised in ``streamReader()`` turns into in pyspark 4.3's source runner.

    Why not at ``load()`` or ``start()`` (pyspark 4.3; docs/source.md, "Troubleshooting"):
    ``load()``'s one Python call is ``pyspark/sql/worker/create_data_source.py`` ``_main()``
    (class, format name, optional schema, options; then ``schema()``), identical for
    ``spark.read`` and ``spark.readStream``: the JVM's ``ResolveDataSource`` knows
    ``UnresolvedDataSource.isStreaming`` but calls ``DataSourceV2Utils.getTableFromProvider``
    -> ``PythonDataSourceV2.inferSchema`` -> ``createDataSourceInPython``, which pass no flag.
    ``start()`` returns once ``StreamExecution.runStream`` has counted ``startLatch`` down,
    before "Initializing sources" (``MicroBatchExecution.logicalPlan`` ->
    ``PythonScan.toMicroBatchStream`` -> ``PythonStreamingSourceRunner`` ->
    ``pyspark/sql/streaming/python_streaming_source_runner.py`` ``main()`` ->
    ``streamReader()``), the first Python call that knows the read is a stream; so the error
    can only reach ``awaitTermination()``. The assertions below pin that: ``load()`` and
    ``start()`` return, the first line of the query's exception is ours.
    """
    write_inputs(str(tmp_path / "in"), rows=10)
    opts = source_options(str(tmp_path / "in"), 3, "")
    query = (spark.readStream.format("ordered-agg").options(**opts).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(Exception, match="option stateLocation is required") as info:
        query.awaitTermination(120)
    assert "ConfigError: option stateLocation is required" in str(info.value).splitlines()[0]


def test_partition_group_change_is_refused_at_restart(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=50)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"), endOfInput="never")
    run_available_now(spark, opts, str(tmp_path / "ckpt"))
    sink: list[Any] = []
    with pytest.raises(Exception, match="partitionGroups is 4 but the query in stateLocation"):
        start_query(spark, opts | {"partitionGroups": "4"}, str(tmp_path / "ckpt"), sink)
    assert not sink


def test_lost_state_is_a_clear_error_on_restart(spark, tmp_path) -> None:
    tables = [make_stream(9, j, 120) for j in range(2)]
    for j, table in enumerate(tables):
        os.makedirs(tmp_path / f"in{j}")
        pq.write_table(table.slice(0, 60), tmp_path / f"in{j}" / "part-000.parquet")
    opts = source_options(str(tmp_path), 2, str(tmp_path / "s"), endOfInput="never")
    run_available_now(spark, opts, str(tmp_path / "ckpt"))
    shutil.rmtree(tmp_path / "s" / "versions")
    for j, table in enumerate(tables):
        pq.write_table(table.slice(60), tmp_path / f"in{j}" / "part-001.parquet")
    sink: list[Any] = []
    query = start_query(spark, opts, str(tmp_path / "ckpt"), sink)
    with pytest.raises(Exception, match=r"state version \S+ is missing: \S+ holds no "
                                        r"manifest, so this stateLocation does not hold"):
        query.awaitTermination(timeout=120)
    assert not sink


def test_register_is_idempotent_with_auto_registration(spark, tmp_path) -> None:
    from spark_stream_sched.spark import register

    register(spark)
    write_inputs(str(tmp_path / "in"), n_inputs=1, rows=30)
    opts = source_options(str(tmp_path / "in"), 1, str(tmp_path / "s"))
    rows = flatten(run_available_now(spark, opts, str(tmp_path / "ckpt")))
    assert rows
    assert all(isinstance(r["n"], int) for r in rows)
