"""``bench spark``: Spark's native query against ours, end to end, on the same data and session.

Every engine reads the same generated smart-grid files (default 2 M rows, 8 inputs, 1000 keys,
30 s windows sliding by 3 s, ``count``, ``avg`` and ``first``; :mod:`.spark_data`) with
``Trigger.AvailableNow`` and writes Parquet:

* **native**: ``union`` of N file streams + ``withWatermark`` + ``groupBy(window, key)``
  (append mode) with ``first(value)``, which Spark documents as non-deterministic;
* **native-minby**: the same query with the first value a careful Spark user computes instead,
  ``min_by(value, struct(ts, input, _metadata.file_name, _metadata.row_index))``: the minimum
  by a position built from Spark's own file metadata, right on ties (the files' names sort in
  stream order). It is the honest native peer of an ordered first value;
* **ordered-agg**: the source, ``spark.readStream.format("ordered-agg")`` over the N directories;
  by default (``splitRows=auto``, for Parquet ``tasks``) each task reads the batch's rows and
  the driver admits whole row groups from the files' footers; **ordered-agg-driver** the same
  with ``splitRows=driver`` (the driver reads and splits the rows, each task reads its own);
* **transform**: ``ordered(...)`` over the N file streams -> ``window`` -> ``agg``
  (``transformWithStateInPandas``, RocksDB state) into Spark's Parquet sink;
  **transform-keyed** the same with a keyed row operator before the windows
  (:data:`~.spark_data.KEYED_STAGES`, ``delta(value)`` per meter: every row, with every input
  column, waits in the group's state until it is ready and passes through the operator; the
  windows, and so the truth, are those without it). Its sequence is an integer position
  (keyed operators need one): the file's number and the row index;
* **ordered-agg-sink**: the native union of N file streams through
  :func:`~spark_stream_sched.spark.sink.partition_for_sink` into
  ``writeStream.format("ordered-agg")``, then ``finish_sink``; **ordered-agg-sink-unpartitioned**
  is the same without ``partition_for_sink``;
* **floor-precomputed** / **floor-empty**: a Python source that yields the source's result
  batches, or nothing, into the same Parquet sink (:mod:`.spark_floor`);
* **floor-input** / **floor-python**: the file streams of the transformation and the sink, read
  by Spark into the ``noop`` sink, or handed to a Python ``mapInArrow`` that only counts them
  (:mod:`.spark_floor`): the least an engine reading Spark's inputs, or one running Python on
  them, can take; **floor-tws**: the transformation's packed input through
  ``transformWithStateInPandas`` with a processor that does nothing;
  **floor-apply-in-pandas-with-state** / **floor-tws-row**: floor-tws's packed input through
  ``applyInPandasWithState`` (``ordered()``'s operator) or the row-based
  ``transformWithState``, doing nothing alike; **floor-apply-in-pandas-with-state-keyed**: the
  first for transform-keyed's input (every column, the integer sequence).

This module holds the queries; :mod:`.spark_bench` runs the cases (the engines that scale also
on ``local[1]``, ``local[2]`` and a cluster, projected by :mod:`.spark_model`), :mod:`.spark_cli`
is ``spark-stream-sched bench spark``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_stream_sched.bench.spark_data import (  # re-exported for tests/spark/test_job.py
    AGGREGATES,
    END_COLUMN,
    KEYED_STAGES,
    SOURCE_SPLIT_ROWS,
    Workload,
    reference_windows,
    sink_options,
    source_options,
    true_windows,
)
from spark_stream_sched.bench.spark_floor import (
    INPUT_FLOORS,
    SOURCE_FLOORS,
    Floor,
    floor_stream,
)
from spark_stream_sched.bench.spark_stages import last_stage, stage_totals
from spark_stream_sched.errors import ConfigError

__all__ = ["LONG_ENGINES", "reference_windows", "run_engine", "true_windows"]

#: Engines of the long-stream case (native would take minutes per run there). It runs the
#: source with its own batch sizing, which the file streams of the input floors cannot follow.
LONG_ENGINES = ("ordered-agg", "ordered-agg-driver", *SOURCE_FLOORS)
Record = dict[str, Any]


def unavailable(engine: str) -> str | None:
    """Why the installed pyspark cannot run ``engine`` (one line), or None when it can.

    Only ``floor-tws-row`` can be missing: ``GroupedData.transformWithState`` came with pyspark
    4.1. Called on the driver.
    """
    if engine != "floor-tws-row":
        return None
    import pyspark
    from pyspark.sql import GroupedData

    if hasattr(GroupedData, "transformWithState"):
        return None
    return (f"pyspark {pyspark.__version__} has no GroupedData.transformWithState "
            f"(row-based, pyspark >= 4.1)")


# -- the queries -------------------------------------------------------------------------------


def run_engine(spark: Any, engine: str, work: Workload, out: Path, files: int,
               floor: Floor | None) -> Record:
    """Run one engine's query into ``out``; return ``{"seconds": wall time, ...}``.

    ``files``: files per input per micro-batch (the source gets as many rows; 0 gives it its
    default sizing). ``floor``: the precomputed output (floor engines only). ``stages``: the
    query's task metrics as Spark's executors measured them (:mod:`.spark_stages`; empty
    when the session serves no REST API).
    """
    before = last_stage(spark)
    record = _run_engine(spark, engine, work, out, files, floor)
    return {**record, "stages": stage_totals(spark, before)}


def _run_engine(spark: Any, engine: str, work: Workload, out: Path, files: int,
                floor: Floor | None) -> Record:
    if engine in ("native", "native-minby"):
        return run_native(spark, work, out, files, minby=engine == "native-minby")
    if engine in SOURCE_SPLIT_ROWS:
        return run_ordered(spark, work, out, work.max_records(files) if files else None,
                           SOURCE_SPLIT_ROWS[engine])
    if engine in ("transform", "transform-keyed"):
        return run_transform(spark, work, out, files, keyed=engine == "transform-keyed")
    if engine in ("ordered-agg-sink", "ordered-agg-sink-unpartitioned"):
        return run_sink(spark, work, out, files, partitioned=engine == "ordered-agg-sink")
    if engine in STATEFUL_FLOORS:
        return run_op_floor(spark, work, out, files, keyed=engine.endswith("-keyed"),
                             operator=STATEFUL_FLOORS[engine])
    if engine in INPUT_FLOORS:
        return run_input_floor(spark, work, out, files, python=engine == "floor-python")
    if floor is None:
        raise ConfigError(f"engine {engine!r} needs the precomputed floor output")
    return {"seconds": _run_query(_to_parquet(floor_stream(spark, engine, floor), out))}


def _run_query(writer: Any) -> float:
    """Start ``writer`` with ``Trigger.AvailableNow``, wait for it; return the wall seconds."""
    return _timed_query(writer)[0]


def _timed_query(writer: Any) -> tuple[float, Any]:
    """:func:`_run_query`, also returning the finished ``StreamingQuery``."""
    from spark_stream_sched.jobs.runner import await_query

    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    await_query(query)
    return time.perf_counter() - started, query


def _rows_read(query: Any) -> int:
    """Rows a finished query read from its sources (its progress reports' ``numInputRows``)."""
    return sum(p["numInputRows"] for p in query.recentProgress)


def _to_parquet(frame: Any, out: Path) -> Any:
    return (frame.writeStream.format("parquet").option("path", str(out / "output"))
            .option("checkpointLocation", str(out / "ck")))


def run_native(spark: Any, work: Workload, out: Path, files: int, minby: bool = False) -> Record:
    """Union + watermark + sliding window + ``first()`` (``minby``: ``min_by``), append mode."""
    from pyspark.sql import functions as F  # noqa: N812

    frame = _native_inputs(spark, work, files, minby)
    first = (F.min_by("value", F.col(_POSITION)) if minby else F.first("value"))
    result = (frame.withColumn("event_time", F.timestamp_millis("ts"))
              .withWatermark("event_time", work.watermark)
              .groupBy(F.window("event_time", work.size, work.slide), "meter")
              .agg(F.count("*").alias("n"), F.avg("value").alias("mean"), first.alias("first_v"))
              .select(F.unix_millis(F.col("window.start")).alias("window_start"),
                      F.unix_millis(F.col("window.end")).alias("window_end"),
                      "meter", "n", "mean", "first_v"))
    return {"seconds": _run_query(_to_parquet(result, out).outputMode("append"))}


#: native-minby's position column: ``struct(ts, input, file name, row index)``.
_POSITION = "position"


def _native_inputs(spark: Any, work: Workload, files: int, minby: bool) -> Any:
    """The union of the N file streams; with ``minby`` each row also carries its position.

    The position is built on each input's own stream (Spark resolves ``_metadata`` on a file
    scan, not on a union): ``struct(ts, input, _metadata.file_name, _metadata.row_index)``.
    """
    from functools import reduce

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F  # noqa: N812

    from spark_stream_sched.jobs.runner import INPUT_ID_COLUMN, file_streams

    dirs = [Path(d) for d in work.dirs]
    if not minby:
        return file_streams(spark, dirs, "parquet", work.schema, files)
    streams = []
    for i, directory in enumerate(dirs):
        stream = file_streams(spark, [directory], "parquet", work.schema, files).withColumn(
            INPUT_ID_COLUMN, F.lit(i).cast("int"))
        streams.append(stream.withColumn(_POSITION, F.struct(
            "ts", INPUT_ID_COLUMN, F.col("_metadata.file_name").alias("file_name"),
            F.col("_metadata.row_index").alias("row_index"))))
    return reduce(DataFrame.unionByName, streams)


def run_ordered(spark: Any, work: Workload, out: Path, max_records: int | None,
                split_rows: str = "auto") -> Record:
    """``readStream.format("ordered-agg")`` into Parquet (None: the default sizing).

    ``split_rows``: the source's option ``splitRows`` (where a batch's rows are read and split).
    """
    from spark_stream_sched.spark import register

    register(spark)
    options = {**source_options(work, max_records), "stateLocation": str(out / "state"),
               "splitRows": split_rows}
    frame = spark.readStream.format("ordered-agg").options(**options).load()
    return {"seconds": _run_query(_to_parquet(frame, out))}


def run_transform(spark: Any, work: Workload, out: Path, files: int,
                  keyed: bool = False) -> Record:
    """``ordered(...)`` over one file stream per input (with its end row) into Parquet.

    The sequence is each row's file name and row index (as the sink's); ``keyed``: the
    operators :data:`~.spark_data.KEYED_STAGES` before the windows, over an integer sequence.
    The session settings ``configure`` makes (RocksDB state store) are undone afterwards, so
    native keeps Spark's default state store.
    """
    from spark_stream_sched.spark.transform import configure

    with _session_settings(spark):
        configure(spark)
        windows = _ordered_inputs(spark, work, files, keyed).window(work.size, work.slide).agg(
            *AGGREGATES)
        return {"seconds": _run_query(_to_parquet(windows, out))}


#: The stateful operator each floor of :data:`~.spark_floor.PACKED_FLOORS` runs.
STATEFUL_FLOORS = {"floor-tws": "transformWithStateInPandas",
                   "floor-apply-in-pandas-with-state": "applyInPandasWithState",
                   "floor-apply-in-pandas-with-state-keyed": "applyInPandasWithState",
                   "floor-tws-row": "transformWithState"}


def run_op_floor(spark: Any, work: Workload, out: Path, files: int,
                  keyed: bool = False, operator: str = "transformWithStateInPandas") -> Record:
    """The transformation's packed input through a Spark stateful operator doing nothing.

    ``operator`` (a value of :data:`STATEFUL_FLOORS`): ``transformWithStateInPandas`` (no
    timers, as ``ordered()``) with :class:`~.spark_floor_sources.DiscardingProcessor`,
    ``transformWithState`` (rows, no timers) with
    :class:`~.spark_floor_sources.DiscardingRowProcessor`, or
    ``applyInPandasWithState`` (append, no timeout) with
    :func:`~.spark_floor_sources.discard_with_state`. None of them touches its state; all
    keep it in the RocksDB state store ``configure`` sets. Every one writes to the ``noop``
    sink. ``keyed``: transform-keyed's input (every column and the integer sequence).
    """
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import BinaryType, LongType, StructField, StructType

    from spark_stream_sched.bench.spark_floor_sources import (
        DiscardingProcessor,
        DiscardingRowProcessor,
        discard_with_state,
    )
    from spark_stream_sched.runtime.engine.packing import GROUP
    from spark_stream_sched.spark.transform import configure, packed_inputs

    nothing = StructType([StructField("nothing", BinaryType())])
    with _session_settings(spark):
        configure(spark)
        streams = _ordered_inputs(spark, work, files, keyed)
        packed, _ = packed_inputs(streams, streams.spec(AGGREGATES, (work.size, work.slide)))
        grouped = packed.groupBy(GROUP)
        if operator == "applyInPandasWithState":
            frame = grouped.applyInPandasWithState(
                discard_with_state, nothing, StructType([StructField("unused", LongType())]),
                "append", GroupStateTimeout.NoTimeout)
        elif operator == "transformWithState":
            frame = grouped.transformWithState(DiscardingRowProcessor(), nothing, "Append",
                                               "None")
        elif operator == "transformWithStateInPandas":
            frame = grouped.transformWithStateInPandas(DiscardingProcessor(), nothing, "Append",
                                                       "None")
        else:
            raise ConfigError(f"stateful floor operator {operator!r}: choose from "
                              f"{', '.join(sorted(set(STATEFUL_FLOORS.values())))}")
        seconds, query = _timed_query(frame.writeStream.format("noop")
                                      .option("checkpointLocation", str(out / "ck")))
    # the end-of-input rows are read too: one per input
    return {"seconds": seconds, "rows_read": _rows_read(query) - work.n_inputs}


def _ordered_inputs(spark: Any, work: Workload, files: int, keyed: bool = False) -> Any:
    """``ordered(...)`` over one file stream per input with its end row (not yet a query).

    ``keyed``: with :data:`~.spark_data.KEYED_STAGES`, whose sequence must be an integer:
    ``file number * 2**32 + row index`` (the end-of-input file, which is not data, gets the
    number 2**20, after every data file).
    """
    import pyarrow as pa
    from pyspark.sql import functions as F  # noqa: N812

    from spark_stream_sched.jobs.runner import INPUT_ID_COLUMN, SEQUENCE_COLUMN, file_streams
    from spark_stream_sched.spark.transform import ordered

    schema = work.schema.append(pa.field(END_COLUMN, pa.bool_()))
    inputs = [file_streams(spark, [Path(d)], "parquet", schema, files, with_position=not keyed)
              .drop(INPUT_ID_COLUMN) for d in work.end_dirs]
    if not keyed:
        return ordered(inputs, sequence=SEQUENCE_COLUMN, timestamp="ts", keys=["meter"],
                       end_of_input=END_COLUMN)
    number = F.regexp_extract(F.col("_metadata.file_name"), r"^part-(\d+)\.", 1)
    number = F.when(number == "", F.lit(1 << 20)).otherwise(number.cast("long"))
    inputs = [df.withColumn(SEQUENCE_COLUMN, number * F.lit(1 << 32)
                            + F.col("_metadata.row_index")) for df in inputs]
    return ordered(inputs, sequence=SEQUENCE_COLUMN, timestamp="ts", keys=["meter"],
                   end_of_input=END_COLUMN).operators(*KEYED_STAGES)


@contextmanager
def _session_settings(spark: Any) -> Iterator[None]:
    """Undo, on leaving, every SQL setting the block added or changed."""
    before = dict(spark.conf.getAll)
    try:
        yield
    finally:
        for key, value in dict(spark.conf.getAll).items():
            if key not in before:
                spark.conf.unset(key)
            elif value != before[key]:
                spark.conf.set(key, before[key])


def run_sink(spark: Any, work: Workload, out: Path, files: int, partitioned: bool) -> Record:
    """Native file streams into ``format("ordered-agg")`` (through ``partition_for_sink``).

    ``partition_for_sink`` gets ``spark.sql.shuffle.partitions`` explicitly: without a number,
    Spark's adaptive execution coalesces the repartition of a small micro-batch into one task.
    Also returns the commit markers' CPU counters and the CPU ``finish_sink`` took here.
    """
    from spark_stream_sched.jobs.runner import file_streams
    from spark_stream_sched.spark import register
    from spark_stream_sched.spark.sink import (
        finish_sink,
        parse_sink_options,
        partition_for_sink,
        read_commits,
    )

    register(spark)
    options = sink_options(work, out)
    frame = file_streams(spark, [Path(d) for d in work.dirs], "parquet", work.schema, files,
                         with_position=True)
    if partitioned:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
        frame = partition_for_sink(frame, options, partitions)
    seconds = _run_query(frame.writeStream.format("ordered-agg").options(**options))
    wall, cpu = time.perf_counter(), time.thread_time()
    finish_sink(options)
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    return {"seconds": seconds + wall, "finish_cpu_s": round(cpu, 4),
            "markers": read_commits(parse_sink_options(options))}


def run_input_floor(spark: Any, work: Workload, out: Path, files: int, python: bool) -> Record:
    """The inputs of the transformation and the sink, read and dropped (``noop`` sink).

    The columns a window query needs: event time, key, the aggregated column, the file
    position and the input id. ``python``: through a ``mapInArrow`` that only counts the rows.
    """
    from pyspark.sql.types import LongType, StructField, StructType

    from spark_stream_sched.bench.spark_floor import count_rows
    from spark_stream_sched.jobs.runner import INPUT_ID_COLUMN, SEQUENCE_COLUMN, file_streams

    frame = file_streams(spark, [Path(d) for d in work.dirs], "parquet", work.schema, files,
                         with_position=True).select("ts", "meter", "value", SEQUENCE_COLUMN,
                                                    INPUT_ID_COLUMN)
    if python:
        frame = frame.mapInArrow(count_rows, StructType([StructField("rows", LongType())]))
    seconds, query = _timed_query(frame.writeStream.format("noop")
                                  .option("checkpointLocation", str(out / "ck")))
    # what Spark read: a floor that read less than every row would not be a floor
    return {"seconds": seconds, "rows_read": _rows_read(query)}
