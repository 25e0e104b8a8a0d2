"""``partition_for_sink`` computes keys' groups in Spark, equal to the runtime's.

Real Spark (local): the group Spark computes as ``pmod(hash(keys), n)`` (a sink state's
``murmur3`` function, ``runtime/distribution/murmur3.py``, for integer, boolean, date,
timestamp, float, double, string and binary keys) is the one the sink's tasks compute, for every
key type with nulls and extreme values; the keys of a state started before states recorded their
function are tagged in a Python step.
"""

from __future__ import annotations

import datetime
import math
import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import functions

from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.engine.sink_config import GROUP_FUNCTION
from spark_stream_sched.runtime.query.recorded import record_spec
from spark_stream_sched.spark import sink

pytestmark = pytest.mark.spark

EDGES = [0, -1, 2**63 - 1, -2**63, None]
SCHEMA = ("a long, b int, c boolean, t timestamp, s short, x byte, d date, v double, "
          "name string, u string")
SCHEMA_NAMES = [column.split()[0] for column in SCHEMA.split(", ")]


def frame(spark: Any, rows: int = 400) -> Any:
    rng = random.Random(11)
    epoch = datetime.datetime(1900, 1, 1, tzinfo=datetime.timezone.utc)

    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.1 else value

    def text() -> str:  # 0-13 characters of 1-4 UTF-8 bytes each: every tail of a word
        return "".join(rng.choice("aZ0 éß€😀") for _ in range(rng.randint(0, 13)))

    data = [(rng.choice([*EDGES, rng.randint(-2**63, 2**63 - 1), rng.randint(-9, 9)]),
             maybe(rng.randint(-2**31, 2**31 - 1)), maybe(rng.random() < 0.5),
             maybe(epoch + datetime.timedelta(microseconds=rng.randint(0, 2**55))),
             maybe(rng.randint(-2**15, 2**15 - 1)), maybe(rng.randint(-128, 127)),
             maybe(datetime.date(1, 1, 1) + datetime.timedelta(days=rng.randint(0, 3_000_000))),
             rng.random(), f"m{rng.randint(0, 30)}", maybe(text())) for _ in range(rows)]
    return spark.createDataFrame(data, SCHEMA)


@pytest.mark.parametrize("keys", [["a"], ["b"], ["c"], ["t"], ["s"], ["x"], ["d"], ["n"],
                                  ["name"], ["u"], ["y"], ["a", "b", "c", "t", "s", "x", "d", "n"],
                                  ["d", "c"], ["u", "a", "y"], ["lcase"], ["v"], ["e"], ["fl"],
                                  ["e", "fl", "u"]])
def test_groups_by_sparks_hash_equal_the_runtimes(spark: Any, keys: list[str]) -> None:
    df = frame(spark).withColumn("n", functions.col("t").cast("timestamp_ntz")) \
        .withColumn("y", functions.col("u").cast("binary")) \
        .withColumn("lcase", functions.collate("u", "UTF8_LCASE")) \
        .withColumn("e", functions.when(functions.col("x") % 4 == 0, functions.lit(math.nan))
                    .when(functions.col("x") % 4 == 1, functions.lit(-0.0))
                    .when(functions.col("x") % 4 == 2, functions.lit(0.0))
                    .otherwise(functions.col("a").cast("double"))) \
        .withColumn("fl", functions.col("e").cast("float"))  # lcase: hashed as its bytes
    for n_groups in (1, 7, 64, 4096):
        tagged = sink._with_group_by_spark_hash(df, keys, n_groups, "g").toArrow()
        by_runtime = group_of_rows(tagged, keys, n_groups, "murmur3")
        assert tagged.column("g").to_numpy().tolist() == by_runtime.tolist(), (keys, n_groups)
        assert len(set(by_runtime.tolist())) > min(n_groups, 3) - 1


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().analyzed())


@pytest.mark.parametrize("keys", ["a", "a,t", "v", "name", "a,name"])
@pytest.mark.parametrize("earlier_state", [False, True])
def test_new_states_route_by_sparks_hash_earlier_ones_in_python(
        spark: Any, tmp_path: Any, keys: str, earlier_state: bool) -> None:
    df = frame(spark, 10)
    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": "2", "inputColumn": "x", "keyColumns": keys, "timestampColumn": "t",
            "window": "10 seconds", "aggregates": "count(*) as n"}
    if earlier_state:  # a state an earlier version started: its record names no function
        config = sink.parse_sink_options(opts)
        wiring = {k: v for k, v in config.wiring().items() if k != GROUP_FUNCTION}
        record_spec(config.state_location, config.spec, wiring)
    moved = sink.partition_for_sink(df, opts, partitions=3)
    plan = _plan(moved)
    assert ("MapInArrow" in plan) is earlier_state
    assert ("pmod(hash(" in plan) is not earlier_state, plan
    assert moved.columns == df.columns  # without sequenceColumn every column orders ties
    assert moved.count() == 10


@pytest.mark.parametrize(("query", "kept"), [
    ({"aggregates": "count(*) as n", "sequenceColumn": "b"}, ["a", "b", "t", "x"]),
    ({"aggregates": "first(v) as f, count_where(c) as n", "sequenceColumn": "b"},
     ["a", "b", "c", "t", "x", "v"]),
    ({"aggregates": "count(*) as n", "where": "s > 0", "sequenceColumn": "d"},
     ["a", "t", "s", "x", "d"]),
    # ties of one input are ordered by every other column
    ({"aggregates": "count(*) as n"}, SCHEMA_NAMES),
    ({"aggregates": "count(*) as n", "operators": "delta(v) as dv", "sequenceColumn": "b"},
     SCHEMA_NAMES),
])
def test_columns_the_query_does_not_use_are_not_shuffled(
        spark: Any, tmp_path: Any, query: dict[str, str], kept: list[str]) -> None:
    df = frame(spark, 10)
    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": "2", "inputColumn": "x", "keyColumns": "a", "timestampColumn": "t",
            "window": "10 seconds", **query}
    moved = sink.partition_for_sink(df, opts, partitions=3)
    assert moved.columns == kept
    assert Counter(moved.collect()) == Counter(df.select(*kept).collect())
