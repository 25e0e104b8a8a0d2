"""Shared helpers of the source tests: generated inputs, option sets, oracle comparison."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from .datagen import make_stream, write_stream

AGGREGATES = ("count(*) as n, count(value) as nv, avg(value) as mean, min(value) as lo, "
              "max(value) as hi, first(value) as first_v, last(value) as last_v, "
              "first_where(value, kind = 'alarm' and value > 5) as first_alarm, "
              "count_where(kind = 'alarm') as alarms, max_by(value, kind) as value_by_kind, "
              "min_by(kind, ts) as kind_by_ts")
WINDOW, SLIDE = "10 seconds", "5s"


def write_inputs(root: str, n_inputs: int = 3, rows: int = 300, seed: int = 1,
                 files: int = 3, fmt: str = "parquet", ts_type: str = "int64") -> list[pa.Table]:
    """Write ``n_inputs`` generated streams under ``root/in<j>``; return their tables."""
    tables = [make_stream(seed, j, rows + 37 * j, ts_type=ts_type) for j in range(n_inputs)]
    for j, table in enumerate(tables):
        write_stream(table, os.path.join(root, f"in{j}"), files + j, fmt=fmt)
    return tables


def source_options(root: str, n_inputs: int, state: str, **extra: Any) -> dict[str, str]:
    """Options of a windowed ``first()``-style query over the inputs of :func:`write_inputs`."""
    opts = {"inputs": ",".join(os.path.join(root, f"in{j}") for j in range(n_inputs)),
            "window": WINDOW, "slide": SLIDE, "keyColumns": "meter", "aggregates": AGGREGATES,
            "stateLocation": state, "endOfInput": "availableNow"}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def expected_rows(tables: list[pa.Table]) -> list[dict[str, Any]]:
    """The oracle's rows for the query of :func:`source_options`."""
    return reference_aggregate(tables, WindowSpec.parse(WINDOW, SLIDE), ["meter"], AGGREGATES)


def output_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """Documented output order within a micro-batch: (window_end, window_start, key)."""
    return (row["window_end"], row["window_start"], row["meter"])


def assert_matches_oracle(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Every value exact, averages bit for bit too (sums are exactly rounded on every path)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert got.keys() == want.keys()
        for name, value in want.items():
            if isinstance(value, float) and isinstance(got[name], float):
                assert got[name].hex() == value.hex(), (name, got, want)
            else:
                assert got[name] == value, (name, got, want)


def start_query(spark: Any, opts: dict[str, str], checkpoint: str, sink: list[Any],
                available_now: bool = True) -> Any:
    """Start a query whose micro-batches are collected into ``sink`` as (batch id, rows)."""
    def collect(df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        sink.append((batch_id, sorted(rows, key=output_key)))

    reader = spark.readStream.format("ordered-agg")
    for key, value in opts.items():
        reader = reader.option(key, value)
    writer = reader.load().writeStream.foreachBatch(collect).option(
        "checkpointLocation", checkpoint)
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def run_available_now(spark: Any, opts: dict[str, str], checkpoint: str) -> list[Any]:
    sink: list[Any] = []
    query = start_query(spark, opts, checkpoint, sink)
    query.awaitTermination(timeout=300)
    assert query.exception() is None
    return sink


def flatten(batches: list[Any]) -> list[dict[str, Any]]:
    return [row for _, rows in sorted(batches, key=lambda b: b[0]) for row in rows]


def kill_after_batches(driver: Any, n_batches: int, group: bool = False) -> list[str]:
    """Read a driver's ``BATCH <id>`` lines; SIGKILL it after ``n_batches``; return the lines.

    ``group`` kills the driver's whole process group (start it with ``start_new_session``):
    Python, the JVM and Spark's Python workers. Fails if the driver ended before that.
    """
    import signal

    assert driver.stdout is not None
    seen: list[str] = []
    for line in driver.stdout:
        if line.startswith("BATCH"):
            seen.append(line.strip())
            if len(seen) == n_batches:
                if group:
                    os.killpg(driver.pid, signal.SIGKILL)
                else:
                    driver.send_signal(signal.SIGKILL)
                break
    driver.wait(timeout=120)
    assert driver.returncode == -signal.SIGKILL, "the driver finished before it was killed"
    return seen


def drive_batches(reader: Any, limit: int, split: bool = True
                  ) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Drive a stream reader as Spark's runner would (no JVM): every batch to the end.

    Returns the rows ``read()`` yielded, in order, and each batch's partitions. With ``split``
    False every task reads the rows itself (the fallback of ``inputs/split.py``). The calls come
    in Spark's order (``MicroBatchExecution``): the offsets of batch ``n`` are committed to the
    source only after ``latestOffset`` planned batch ``n + 1``, so the last batch of a
    ``Trigger.AvailableNow`` run is never committed, and ``stop()`` is not called (Spark ends
    the source runner's process without it).
    """
    from dataclasses import replace

    from pyspark.sql.streaming.datasource import ReadMaxRows

    reader.prepareForTriggerAvailableNow()
    start, rows, planned = reader.initialOffset(), [], []
    previous = None
    while True:
        end = reader.latestOffset(start, ReadMaxRows(limit))
        if end == start:
            return rows, planned
        if previous is not None:
            reader.commit(previous)
        parts = [p if split else replace(p, rows_file=None) for p in reader.partitions(start, end)]
        planned.append(parts)
        rows += [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
        previous = start = end


def run_to_end(query: Any) -> BaseException | None:
    """Wait for the query (at most 300 s); return the exception it failed with (None: done)."""
    import contextlib

    from pyspark.errors import StreamingQueryException

    with contextlib.suppress(StreamingQueryException):
        query.awaitTermination(300)
    assert not query.isActive
    return query.exception()


def file_bytes(directory: Path) -> dict[str, bytes]:
    """Name -> bytes of every file directly in ``directory`` (compared byte for byte)."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
