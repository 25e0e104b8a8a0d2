"""The four doors of the hostile-input suite, each fed the same query and the same files.

A query is a :class:`Query` (window, keys, aggregates as the CLI's flags would hold them); each
door runs it over the same inputs (``ts`` int64 ms, ``meter``, ``value``: one directory of
Parquet files per input) and returns the result rows sorted, or raises :class:`Refused` with
the first line of what the user sees: the CLI's ``error:`` line, the first line of Spark's
exception for the source (batch read) and the sink (a file stream of the same files), and
for ``ordered()``, which raises in the user's process, Python's last traceback line.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.cli import main

DOORS = ("cli", "source", "sink", "ordered")


class Refused(Exception):  # noqa: N818 - what the door did
    """The door refused the query; ``str()`` is the first line the user sees."""


@dataclass(frozen=True)
class Query:
    """One query as every door takes it."""

    aggregates: Sequence[str]
    keys: Sequence[str] = ("meter",)
    window: str = "10 seconds"
    slide: str | None = None
    extra: dict[str, str] = field(default_factory=dict)  # source and sink options only


def write_inputs(root: Path, tables: Sequence[pa.Table]) -> list[str]:
    """One directory per input, each table as one Parquet file; the directories."""
    dirs = []
    for j, table in enumerate(tables):
        d = root / f"in{j}"
        d.mkdir(parents=True)
        pq.write_table(table, d / "part-0000.parquet")
        dirs.append(str(d))
    return dirs


def run(door: str, spark: Any, tmp: Path, dirs: Sequence[str], q: Query) -> list[dict[str, Any]]:
    """The result rows of ``q`` through ``door`` (sorted), or :class:`Refused`."""
    tmp.mkdir(parents=True, exist_ok=True)
    rows = {"cli": _cli, "source": _source, "sink": _sink, "ordered": _ordered}[door](
        spark, tmp, dirs, q)
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def _first_line(error: BaseException) -> str:
    return next(line for line in str(error).strip().splitlines() if line.strip())


def _cli(spark: Any, tmp: Path, dirs: Sequence[str], q: Query) -> list[dict[str, Any]]:
    out = tmp / "cli.parquet"
    args = ["aggregate", *[x for d in dirs for x in ("--input", d)], "--window", q.window,
            *[x for k in q.keys for x in ("--key", k)],
            *[x for a in q.aggregates for x in ("--agg", a)], "--out", str(out)]
    if q.slide:
        args += ["--slide", q.slide]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(args)
    if rc != 0:
        raise Refused(err.getvalue().strip().splitlines()[0])
    return pq.read_table(out).to_pylist()


def _options(q: Query) -> dict[str, str]:
    opts = {"window": q.window, "keyColumns": ",".join(q.keys),
            "aggregates": ", ".join(q.aggregates), "timestampColumn": "ts", **q.extra}
    if q.slide:
        opts["slide"] = q.slide
    return opts


def _source(spark: Any, tmp: Path, dirs: Sequence[str], q: Query) -> list[dict[str, Any]]:
    opts = {**_options(q), "inputs": ",".join(dirs), "stateLocation": str(tmp / "state")}
    try:
        return [r.asDict() for r in spark.read.format("ordered-agg").options(**opts).load()
                .collect()]
    except Exception as exc:  # noqa: BLE001 - what Spark raised is what the user sees
        raise Refused(_first_line(exc)) from exc


def _streams(spark: Any, dirs: Sequence[str]) -> list[Any]:
    """Each input as Spark's file stream, with its position ``pos`` and id ``input``."""
    from pyspark.sql import functions as F  # noqa: N812

    schema = spark.read.parquet(dirs[0]).schema
    row = F.lpad(F.col("_metadata.row_index").cast("string"), 19, "0")
    return [spark.readStream.schema(schema).parquet(d)
            .withColumn("pos", F.concat_ws("#", F.col("_metadata.file_name"), row))
            .withColumn("input", F.lit(j)) for j, d in enumerate(dirs)]


def _sink(spark: Any, tmp: Path, dirs: Sequence[str], q: Query) -> list[dict[str, Any]]:
    import functools

    from pyspark.sql import DataFrame

    from spark_stream_sched.spark.sink import finish_sink

    opts = {**_options(q), "inputs": str(len(dirs)), "inputColumn": "input",
            "sequenceColumn": "pos", "path": str(tmp / "sink-out"),
            "checkpointLocation": str(tmp / "sink-ck")}
    frame = functools.reduce(DataFrame.unionByName, _streams(spark, dirs))
    try:
        query = (frame.writeStream.format("ordered-agg").options(**opts)
                 .trigger(availableNow=True).start())
        query.awaitTermination(timeout=300)
    except Exception as exc:  # noqa: BLE001
        raise Refused(_first_line(exc)) from exc
    finish_sink(opts)
    return [r for r in pq.read_table(opts["path"]).to_pylist()]


def _ordered(spark: Any, tmp: Path, dirs: Sequence[str], q: Query) -> list[dict[str, Any]]:
    from spark_stream_sched.spark.transform import configure, ordered

    configure(spark)
    streams = [s.drop("input") for s in _streams(spark, dirs)]
    try:
        windows = (ordered(streams, sequence="pos", keys=list(q.keys))
                   .window(q.window, slide=q.slide).agg(*q.aggregates))
    except Exception as exc:  # noqa: BLE001 - raised in the user's process: Python's last line
        raise Refused(f"{type(exc).__module__}.{type(exc).__name__}: {_first_line(exc)}") from exc
    got: list[dict[str, Any]] = []
    query = (windows.writeStream.foreachBatch(
        lambda df, _: got.extend(r.asDict() for r in df.collect()))
        .option("checkpointLocation", str(tmp / "ordered-ck")).trigger(availableNow=True)
        .start())
    query.awaitTermination(timeout=300)
    if query.exception() is not None:
        raise Refused(_first_line(query.exception()))
    return got
