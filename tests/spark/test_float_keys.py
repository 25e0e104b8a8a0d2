"""Floating window keys through the source and the sink equal Spark's own ``groupBy`` count.

Keys ``0.0``, ``-0.0`` and NaNs of four bit patterns: Spark's grouping normalises them to two
keys (``0.0`` and the quiet NaN) and so must every door (docs/keyed.md).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
from spark_stream_sched.spark import register, sink

from .test_sink import start_sink_query, write_file_streams

pytestmark = pytest.mark.spark


def from_bits(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def bits(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


KEYS = [0.0, -0.0, from_bits(0x7FF8000000000000), from_bits(0xFFF8000000000001),
        from_bits(0x7FF0000000000001), 1.5]


def float_keyed(rows: int = 240) -> pa.Table:
    """One input over 4 minutes, keys cycling through :data:`KEYS`."""
    return pa.table({"ts": pa.array([i * 1000 for i in range(rows)], pa.int64()),
                     "k": pa.array([KEYS[i % len(KEYS)] for i in range(rows)], pa.float64()),
                     "value": pa.array([float(i) for i in range(rows)], pa.float64()),
                     "dc": pa.array([0] * rows, pa.int32())})


def spark_counts(spark: Any, directory: Path) -> set[tuple[int, int, int]]:
    """``(window_start ms, key bits, count)`` of Spark's ``groupBy(window, k).count()``."""
    from pyspark.sql import functions as F  # noqa: N812

    frame = spark.read.parquet(str(directory))
    grouped = frame.groupBy(F.window(F.timestamp_millis("ts"), "1 minute").alias("w"),
                            "k").count()
    return {(r["start"], bits(r["k"]), r["count"]) for r in grouped.select(
        F.unix_millis("w.start").alias("start"), "k", "count").collect()}


def ours(rows: list[dict[str, Any]]) -> set[tuple[int, int, int]]:
    return {(r["window_start"], bits(r["k"]), r["n"]) for r in rows}


def test_float_keys_through_the_source_equal_spark_group_by(spark: Any,
                                                           tmp_path: Path) -> None:
    register(spark)
    (directory,) = write_file_streams([float_keyed()], tmp_path / "in", files_per_input=3)
    opts = {"inputs": str(directory), "window": "1 minute", "keyColumns": "k",
            "aggregates": "count(*) as n", "stateLocation": str(tmp_path / "state"),
            "endOfInput": "availableNow"}
    rows: list[dict[str, Any]] = []
    reader = spark.readStream.format("ordered-agg").options(**opts).load()
    query = (reader.writeStream.foreachBatch(lambda df, _: rows.extend(
        r.asDict() for r in df.collect())).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    expected = spark_counts(spark, directory)
    assert len(expected) == 4 * 3  # 4 windows x {0.0, NaN, 1.5}
    assert ours(rows) == expected
    assert len(rows) == len(expected)


def test_float_keys_through_the_sink_equal_spark_group_by(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    register(spark)
    table = float_keyed()
    dirs = write_file_streams([table], tmp_path / "in", files_per_input=3)
    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": "1", "inputColumn": "dc", "keyColumns": "k", "window": "1 minute",
            "aggregates": "count(*) as n", "sequenceColumn": SEQUENCE_COLUMN}
    query = start_sink_query(spark, dirs, table.schema, opts, files_per_trigger=1)
    query.awaitTermination()
    assert query.exception() is None
    sink.finish_sink(opts)
    rows = [r for f in sorted((tmp_path / "out").glob("part-*.parquet"))
            for r in pq.read_table(f).to_pylist()]
    expected = spark_counts(spark, dirs[0])
    assert ours(rows) == expected
    assert len(rows) == len(expected)
