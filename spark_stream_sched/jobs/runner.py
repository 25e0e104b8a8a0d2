"""Run a job: generate its inputs if asked, run the ordered aggregation, report the result.

Shared by ``spark-submit .../jobs/ordered_agg_job.py --conf <job>.toml``, ``spark-stream-sched
run <job>.toml`` and ``spark-stream-sched demo``. Three engines (see :mod:`.config`):

* ``source``  -- ``spark.readStream.format("ordered-agg")`` → Spark's Parquet file sink;
* ``sink``    -- union of N native file streams → ``writeStream.format("ordered-agg")``;
* ``runtime`` -- the pure runtime, no Spark.

Every Spark engine runs with ``Trigger.AvailableNow`` and a checkpoint, so re-running a job after
a crash resumes where it stopped and writes each result exactly once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, SparkStreamSchedError
from spark_stream_sched.jobs.config import JobConfig
from spark_stream_sched.jobs.results import JobResult, count_input_rows, join_totals, read_output
from spark_stream_sched.runtime.state.atomic import atomic_writer
from spark_stream_sched.spark import embedded

logger = logging.getLogger(__name__)

#: Name of the input-id column the ``sink`` engine adds to each file stream.
INPUT_ID_COLUMN = "input_id"
#: Position of a row in its input (file name + row index), added for Parquet inputs so the sink
#: orders equal timestamps of one input by file order, exactly like the source.
SEQUENCE_COLUMN = "input_position"


# -- inputs ------------------------------------------------------------------------------------


def prepare_inputs(cfg: JobConfig) -> list[Path]:
    """Generate the sample streams when the config asks for it; return the input directories.

    Generation is skipped when ``<dir>/_generated.json`` records the same parameters, so a
    restarted job reads exactly the files its checkpoint refers to.
    """
    dirs = cfg.input_dirs()
    if not cfg.data.generate:
        missing = [str(d) for d in dirs if not d.exists()]
        if missing:
            raise ConfigError(f"[data] paths do not exist: {missing}")
        return dirs
    from spark_stream_sched.data.smart_grid import smart_grid_streams
    from spark_stream_sched.inputs import write_inputs

    stamp = Path(cfg.data.dir) / "_generated.json"
    params = json.dumps(cfg.data.__dict__, sort_keys=True, default=list)
    if stamp.exists() and stamp.read_text() == params:
        logger.info("inputs in %s are already generated", cfg.data.dir)
        return dirs
    d = cfg.data
    tables = smart_grid_streams(d.inputs, d.meters, rows=d.rows, seed=d.seed, tick_ms=d.tick_ms,
                                reading_interval_ms=d.reading_interval_ms)
    written = write_inputs(tables, d.dir, d.format, d.files_per_input)
    order_modification_times(written)
    stamp.write_text(params)
    return dirs


def order_modification_times(dirs: list[Path]) -> None:
    """Give each input's files strictly increasing modification times in name order.

    Spark's file source (used by the ``sink`` engine and the native baseline) admits files in
    modification-time order under ``maxFilesPerTrigger``; files written within the same
    millisecond would be admitted in any order, i.e. out of event-time order.
    """
    from spark_stream_sched.inputs import list_files

    now = time.time()
    for directory in dirs:
        files = list_files(str(directory))
        for i, path in enumerate(files):
            stamp = now - (len(files) - i)
            os.utime(path, (stamp, stamp))


def input_schema(dirs: list[Path], fmt: str) -> pa.Schema:
    """Arrow schema of the inputs: the input layer's resolution (first file holding a row)."""
    from spark_stream_sched.inputs import resolve_schema

    return resolve_schema([str(d) for d in dirs], fmt, hint="check [data] paths")


# -- engines -----------------------------------------------------------------------------------


def _query_options(cfg: JobConfig) -> dict[str, str]:
    """The options the source and the sink share: the query itself."""
    q = cfg.query
    window = ({"window": q.window, "slide": q.slide or q.window} if q.window.strip() else {})
    return {"timestampColumn": q.timestamp_column, "keyColumns": ",".join(q.key_columns),
            **window, "aggregates": ", ".join(q.aggregates), "outOfOrder": q.out_of_order,
            **({"where": q.where} if q.where.strip() else {}),
            **({"operators": "; ".join(q.operators)} if q.operators else {})}


def _source_options(cfg: JobConfig, dirs: list[Path]) -> dict[str, str]:
    return {
        "inputs": ",".join(str(d.resolve()) for d in dirs),
        "format": cfg.data.format,
        **_query_options(cfg),
        "partitionGroups": str(cfg.query.partition_groups),
        "stateLocation": _state_location(cfg),
        "maxRecordsPerTrigger": str(cfg.max_records_per_trigger),
        "endOfInput": "availableNow",
    }


def _state_location(cfg: JobConfig) -> str:
    """The source engine's ``stateLocation``: next to Spark's checkpoint."""
    return str(Path(cfg.checkpoint).resolve() / "ordered-agg-state")


def sink_options(cfg: JobConfig, n_inputs: int) -> dict[str, str]:
    """Options of ``writeStream.format("ordered-agg")`` for this job."""
    position = {"sequenceColumn": SEQUENCE_COLUMN} if cfg.data.format == "parquet" else {}
    return {**position,
        "path": str(Path(cfg.output).resolve()),
        "checkpointLocation": str(Path(cfg.checkpoint).resolve()),
        "inputs": str(n_inputs),
        "inputColumn": INPUT_ID_COLUMN,
        **_query_options(cfg),
    }


def file_streams(spark: Any, dirs: list[Path], fmt: str, schema: pa.Schema,
                 max_files_per_trigger: int, with_position: bool = False) -> Any:
    """Union of one native Spark file stream per directory, each tagged with its input id.

    With ``with_position`` (Parquet only) each row also gets :data:`SEQUENCE_COLUMN`, its file
    name and row index as a string that sorts in stream order.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.pandas.types import from_arrow_schema

    spark_schema = from_arrow_schema(schema)
    from spark_stream_sched.inputs import get_format

    spark_format = get_format(fmt).spark_name
    streams = []
    for i, directory in enumerate(dirs):
        reader = spark.readStream.schema(spark_schema).format(spark_format)
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
        if fmt == "csv":
            reader = reader.option("header", "true")
        stream = reader.load(str(directory)).withColumn(INPUT_ID_COLUMN, F.lit(i).cast("int"))
        if with_position and fmt == "parquet":
            row = F.lpad(F.col("_metadata.row_index").cast("string"), 19, "0")
            stream = stream.withColumn(SEQUENCE_COLUMN,
                                       F.concat_ws("#", F.col("_metadata.file_name"), row))
        streams.append(stream)
    return reduce(DataFrame.unionByName, streams)


_ERROR_LINE = re.compile(r"^\s*([\w.]*(?:Error|Exception)): (.+)$")


def await_query(query: Any) -> None:
    """Wait for a streaming query; turn its failure into one readable error.

    Raises
    ------
    SparkStreamSchedError
        The query failed; the message names the query and the innermost Python error.
    """
    from pyspark.errors import StreamingQueryException

    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        logger.info("query %s failed", query.name, exc_info=True)
        causes = [m.groups() for m in map(_ERROR_LINE.match, str(exc).splitlines()) if m
                  and not m.group(1).endswith("StreamingQueryException")]
        cause = f"{causes[0][0].rsplit('.', 1)[-1]}: {causes[0][1]}" if causes else str(exc)
        raise SparkStreamSchedError(f"Spark query {query.name} failed: {cause} "
                                    f"(run with -v for the full Spark error)") from None


class _ProgressPrinter:
    """Prints one line per finished micro-batch (a StreamingQueryListener, driver side).

    Listener events are asynchronous: the last ones may arrive after the query has ended, so
    :meth:`catch_up` prints the batches the listener has not reported yet from
    ``query.recentProgress``.
    """

    def __init__(self, spark: Any, counted: str) -> None:
        from pyspark.sql.streaming.listener import StreamingQueryListener

        printed: set[int] = set()
        self.printed, self.counted = printed, counted

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                """Nothing to report when the query starts."""

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                """Print the batch id, its rows and its duration."""
                _print_batch(event.progress.batchId, event.progress.numInputRows,
                             event.progress.durationMs, printed, counted)

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                """Nothing to report while idle."""

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                """The caller reports the end."""

        self.spark = spark
        self.listener = Listener()

    def __enter__(self) -> _ProgressPrinter:
        self.spark.streams.addListener(self.listener)
        return self

    def __exit__(self, *exc: object) -> None:
        from spark_stream_sched.spark.metrics import drain_listener_bus

        # Removing the listener (or exiting) while Spark still delivers the last progress
        # event makes Spark log a Py4JNetworkException traceback: let the bus empty first.
        drain_listener_bus(self.spark)
        self.spark.streams.removeListener(self.listener)

    def catch_up(self, query: Any) -> None:
        """Print the finished batches the listener has not reported (yet)."""
        for p in query.recentProgress:
            _print_batch(p.batchId, p.numInputRows, p.durationMs, self.printed, self.counted)


def _print_batch(batch_id: int, rows: int, duration_ms: dict[str, int],
                 printed: set[int], counted: str) -> None:
    """``batch N committed: R <counted>, S s``: Spark's ``numInputRows`` of the batch.

    For the source those are the windows it emitted (its rows are Spark's input); for the
    sink, the rows it took in.
    """
    if batch_id in printed:
        return
    printed.add(batch_id)
    seconds = duration_ms.get("triggerExecution", 0) / 1000
    print(f"batch {batch_id} committed: {rows:,} {counted}, {seconds:.1f} s", flush=True)


def _run_source(spark: Any, cfg: JobConfig, dirs: list[Path]) -> Any:
    from spark_stream_sched.spark import register

    register(spark)
    frame = spark.readStream.format("ordered-agg").options(**_source_options(cfg, dirs)).load()
    query = (frame.writeStream.format("parquet").option("path", str(Path(cfg.output).resolve()))
             .option("checkpointLocation", str(Path(cfg.checkpoint).resolve()))
             .trigger(availableNow=True)
             .queryName(f"{cfg.name}_source").start())
    await_query(query)
    return query


def _run_sink(spark: Any, cfg: JobConfig, dirs: list[Path]) -> Any:
    from spark_stream_sched.spark import register
    from spark_stream_sched.spark.sink import finish_sink

    register(spark)
    frame = file_streams(spark, dirs, cfg.data.format, input_schema(dirs, cfg.data.format),
                         cfg.max_files_per_trigger, with_position=True)
    options = sink_options(cfg, len(dirs))
    query = (frame.writeStream.format("ordered-agg").options(**options)
             .trigger(availableNow=True).queryName(f"{cfg.name}_sink").start())
    await_query(query)
    finish_sink(options)
    return query


def _run_runtime(cfg: JobConfig, dirs: list[Path]) -> dict[str, float] | None:
    """Run the query in this process; its join figures (None: no join stage)."""
    from spark_stream_sched.errors import OutOfOrderError
    from spark_stream_sched.inputs import InputStream, locate, read_inputs
    from spark_stream_sched.runtime.distribution.loads import can_spill, join_figures
    tables = read_inputs([str(d) for d in dirs], cfg.data.format)
    spec = cfg.query.spec(len(tables))
    query = spec.build(tables[0].schema)
    for i, table in enumerate(tables):
        try:
            query.push(i, table)
        except OutOfOrderError as exc:
            raise locate(exc, InputStream(i, str(dirs[i]), cfg.data.format, None)) from None
        query.finish(i)
    out = query.poll()
    with atomic_writer(str(Path(cfg.output) / "part-00000.parquet")) as tmp:
        pq.write_table(out, tmp)
    return join_figures(query.window) if can_spill(spec) else None


def _source_join(cfg: JobConfig, n_inputs: int, first_batch: int) -> dict[str, float] | None:
    """The source's join figures over its batches from ``first_batch`` on (None: no join)."""
    from spark_stream_sched.progress import source_progress
    from spark_stream_sched.runtime.distribution.loads import can_spill

    if not can_spill(cfg.query.spec(n_inputs)):
        return None
    batches = source_progress(_state_location(cfg))
    return join_totals([b for b in batches if b["batch_id"] >= first_batch])


def _spark_batches(checkpoint: str) -> int:
    commits = Path(checkpoint) / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0


def run_job(cfg: JobConfig, spark: Any | None = None, master: str | None = None,
            progress: bool = False) -> JobResult:
    """Run the job described by ``cfg`` and return what it did.

    Parameters
    ----------
    cfg:
        The job.
    spark:
        A SparkSession to use; by default the active one, or a new one on ``master``.
    master:
        Spark master for a new session (``None``: let ``spark-submit`` decide).

    Notes
    -----
    Called on the driver. The Spark session is left running for the caller to stop.
    """
    dirs = prepare_inputs(cfg)
    rows_in = count_input_rows(dirs, cfg.data.format)
    started, startup = time.perf_counter(), 0.0
    batches_before = _spark_batches(cfg.checkpoint)
    join = None
    if cfg.engine == "runtime":
        join = _run_runtime(cfg, dirs)
        batches = 1
    else:
        session = spark if spark is not None else embedded.get_spark(
            f"spark-stream-sched {cfg.name}", cfg.spark, master)
        startup = time.perf_counter() - started
        started += startup
        engine = _run_source if cfg.engine == "source" else _run_sink
        if progress:
            counted = "windows out" if cfg.engine == "source" else "rows in"
            with _ProgressPrinter(session, counted) as printer:
                printer.catch_up(engine(session, cfg, dirs))
        else:
            engine(session, cfg, dirs)
        batches = _spark_batches(cfg.checkpoint) - batches_before
        if cfg.engine == "source":
            join = _source_join(cfg, len(dirs), batches_before)
    seconds = time.perf_counter() - started
    results = read_output(cfg.output, list(cfg.query.key_columns), cfg.query.timestamp_column)
    return JobResult(cfg.engine, len(dirs), rows_in, results.num_rows, batches, seconds,
                     cfg.output, results, startup, join)
