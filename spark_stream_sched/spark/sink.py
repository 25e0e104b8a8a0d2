"""The ``ordered-agg`` streaming sink: ``df.writeStream.format("ordered-agg")``.

Rows of any Spark stream (files, Kafka, rate, ...) that carry an input-id column, an event-time
column and payload are merged in the total order ``(ts, input, seq)`` and aggregated in windows
by the same runtime the source uses, **in the write tasks on the executors**. Results land in
``path`` as Parquet, one file per micro-batch that closed windows, committed exactly once.

How a micro-batch flows (``docs/dev/sink-internals.md``, "Where the work runs")::

    executors  write()   stage the task's rows -> <stateLocation>/staging/batch-<id>/part-*.arrow
                         run the partition groups of these rows through the engine's batch
                         entry (runtime/engine/sink_batch.py): from the version marker <id>-1
                         names, release rows with ts < R_task in the order (ts, input, seq),
                         run the operators, write the groups' state
                         -> <stateLocation>/versions/batch-<id>/group-*.state
    driver     commit()  R of the batch from the tasks' reports, order checks, the groups the
                         tasks could not finish alone, catch-up to R, the version's manifest
                         (runtime/engine/sink_commit_step.py, sink_commit.py)
                         -> <path>/part-batch-<id>.parquet
                         -> <stateLocation>/commits/batch-<id>.json  (the commit marker, last)

:func:`partition_for_sink` gives each partition group's rows to one task; without it a group
split over tasks is merged on the driver (same result).

The state location is owned by one query: at start the sink records (or checks) the owner — the
checkpoint location, the query id Spark keeps in ``<checkpoint>/metadata``, the output path and the
options' fingerprint — in ``<stateLocation>/_sink.json``, so a reused or shared location is refused
with a message naming both queries; the output path likewise, in ``<path>/_ordered-agg-sink.json``
(created exclusively before the first write, checked at every commit), so a second query on one path
is refused before it replaces any result. A batch id whose commit marker exists is then a replay
(Spark re-runs the last batch after a crash) and writes nothing; a commit that crashed before its
marker is recomputed from the previous state version, which rewrites its files under the same names;
batch N is applied only on top of batch N-1's marker (a missing marker is an error naming it, never
a silent gap). The protocol, drawn as a state machine with its crash points, is in
:class:`~spark_stream_sched.runtime.engine.sink_commit.SinkCommitter` and ``docs/sink.md``. Staged
rows travel as Arrow IPC files and state as runtime snapshots: nothing here is pickled except the
small commit message Spark itself requires (it carries each task's report: file names, bounds,
counts).

Options are case-insensitive and validated on the driver when Spark creates the writer, i.e.
when the first micro-batch is planned, before any row is written — not at ``start()``: pyspark
4.3 calls a Python sink only from the query's thread, after ``start()`` has returned, so a bad
option reaches ``awaitTermination()`` / ``query.exception()`` with a first line that says so.
Their types, defaults and meanings: docs/options.md, generated from
:mod:`spark_stream_sched.options.table`.

Input contract. Spark keeps no order between the tasks of a micro-batch, so the sink orders each
input's rows of one batch by ``(ts, sequenceColumn)``; an input's ts that decreases along
``sequenceColumn`` — within a batch, across tasks or across batches — is out of order and
``outOfOrder`` decides (fail naming the input, both sequence values and both timestamps, or
drop and count). Without ``sequenceColumn`` a batch's rows of one input are a set: ties are
broken by the row values (all sortable columns in schema order), deterministic but not the
arrival order, and only a ts below what earlier batches of the input had can be detected. The
ready bound ``R = min over inputs of the latest ts seen`` is taken at each commit, so a window is
emitted once every unfinished input has passed its end. An input is finished by an end-of-input
row (``endOfInputColumn``) or, for bounded jobs, by :func:`finish_sink` after the query stopped
(e.g. after ``Trigger.AvailableNow``): it flushes every open window into
``part-final.parquet`` (which sorts after every ``part-batch-*`` file). Rows for a finished
input are an error.

The staging directory must be visible to the driver and every executor (a local path in
``local[*]`` mode, a shared file system on a cluster). Feeding the sink from Spark's file
sources: they admit files in modification-time order (``maxFilesPerTrigger``), so each input's
files must have increasing mtimes; ``_metadata.file_name`` and ``_metadata.row_index`` give a
``sequenceColumn`` (see :func:`spark_stream_sched.jobs.runner.file_streams`).
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from spark_stream_sched.errors import ConfigError, SpillError, StateError
from spark_stream_sched.options.sink import (  # re-exported: the sink's public surface
    SINK_OPTION_NAMES,
    check_schema,
    parse_sink_options,
)
from spark_stream_sched.runtime.engine.sink_batch import TaskWork, run_task, write_ipc
from spark_stream_sched.runtime.engine.sink_commit import (  # re-exported as well
    SINK_FORMAT_VERSION,
    SinkCommitter,
    read_commits,
    staging_dir,
)
from spark_stream_sched.runtime.engine.sink_config import SinkConfig, with_group_function
from spark_stream_sched.runtime.state.commit_log import batch_name, commit_path, read_marker
from spark_stream_sched.spark.compat import ArrowStreamWriter, arrow_schema
from spark_stream_sched.spark.worker_errors import plain_errors, reported

logger = logging.getLogger(__name__)

__all__ = [
    "PARTITIONED_ROWS", "SINK_FORMAT_VERSION", "SINK_OPTION_NAMES", "OrderedAggStreamWriter",
    "SinkCommitMessage", "SinkCommitter", "SinkConfig", "check_schema", "finish_sink",
    "make_stream_writer", "partition_for_sink", "parse_sink_options", "read_commits", "staging_dir",
]


# -- the Spark writer --------------------------------------------------------------------------


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one write task staged: its Arrow IPC file (or None when it had no rows)."""

    batch_id: int
    partition: int
    attempt: int
    file: str | None
    rows: int
    work: TaskWork | None = None


def _task_identity() -> tuple[int, int, int]:
    """Return ``(batch_id, partition_id, attempt)`` of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = context.getLocalProperty("streaming.sql.batchId") if context else None
    if context is None or batch is None:
        raise StateError("the ordered-agg sink writer runs only inside a streaming Spark task")
    return int(batch), context.partitionId(), context.attemptNumber()


class OrderedAggStreamWriter(ArrowStreamWriter):  # type: ignore[misc]
    """Merges and aggregates on executors; commits through :class:`SinkCommitter` on the driver.

    Notes
    -----
    Must be picklable (it holds only the frozen :class:`SinkConfig`). ``write`` runs on
    executors; ``commit`` and ``abort`` run on the driver in a fresh instance per batch, in
    Spark's Python sink runner. Each of them reports our own errors with our message on
    Spark's first line, without the worker's traceback (:mod:`~.worker_errors`).
    """

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    @reported
    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Stage this task's rows, then merge and aggregate their partition groups here.

        Notes
        -----
        Runs on executors. The rows are staged first (one Arrow IPC file, written atomically):
        the driver reads them only for groups this task cannot finish alone
        (:mod:`~spark_stream_sched.runtime.engine.sink_batch`). Bad rows are not raised here; the
        driver raises them at commit with the whole batch in view.
        """
        batch_id, partition, attempt = _task_identity()
        directory = staging_dir(self.config, batch_id)
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"part-{partition:05d}-{attempt}-{uuid.uuid4().hex}.arrow"
        batches = [batch for batch in iterator if batch.num_rows]
        if not batches:
            return SinkCommitMessage(batch_id, partition, attempt, None, 0)
        table = pa.Table.from_batches(batches)
        try:
            write_ipc(str(final), table)
        except SpillError as exc:
            raise SpillError(f"ordered-agg sink: batch {batch_id}, partition {partition}: "
                             f"{exc}") from exc
        previous = None
        if batch_id > 0:
            marker = commit_path(self.config.state_location, batch_name(batch_id - 1))
            try:
                previous = read_marker(marker)
            except StateError as exc:  # the driver names the problem at commit
                logger.info("ordered-agg sink: %s", exc)
        work = run_task(self.config, batch_id, table, batch_name(batch_id),
                        f"t{partition:05d}a{attempt}-{uuid.uuid4().hex[:8]}", previous,
                        directory)
        return SinkCommitMessage(batch_id, partition, attempt, str(final), table.num_rows, work)

    @reported
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Merge, aggregate and write the batch; refuse it when a task failed.

        Raises
        ------
        StateError
            A task returned no commit message (it failed), or the state is unusable.

        Notes
        -----
        Called on the driver.
        """
        failed = sum(1 for m in messages if m is None)
        if failed:
            self.abort(messages, batchId)
            raise StateError(f"ordered-agg sink: batch {batchId}: {failed} of {len(messages)} "
                             f"write tasks failed (no commit message); nothing was committed. "
                             f"Fix the cause and restart the query from its checkpoint")
        staged = [m for m in messages if isinstance(m, SinkCommitMessage)]
        wrong = [m.batch_id for m in staged if m.batch_id != batchId]
        if wrong or len(staged) != len(messages):
            raise StateError(f"ordered-agg sink: batch {batchId} received commit messages of "
                             f"batches {sorted(set(wrong))} or of another writer")
        written = [m for m in sorted(staged, key=lambda m: m.partition) if m.file]
        SinkCommitter(self.config).commit_batch(batchId, [m.file for m in written if m.file],
                                                [m.work for m in written])

    @reported
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Delete what the tasks of this batch staged; nothing was committed.

        Notes
        -----
        Called on the driver when a task failed.
        """
        directory = staging_dir(self.config, batchId)
        ok = sum(1 for m in messages if m is not None)
        logger.warning("ordered-agg sink: aborting batch %d (%d of %d tasks succeeded); "
                       "removing %s", batchId, ok, len(messages), directory)
        shutil.rmtree(directory, ignore_errors=True)


def make_stream_writer(options: Mapping[str, str], schema: StructType) -> OrderedAggStreamWriter:
    """Build the stream writer for ``DataSource.streamWriter``; validate options and columns.

    Notes
    -----
    Called on the driver in a planner worker (and again for each commit). pyspark 4.3 creates
    a Python sink's writer in the query's own thread when it plans the first micro-batch,
    after ``start()`` has returned, so a bad sink option fails there, before any row is
    written, and reaches ``awaitTermination()`` / ``query.exception()``; the message says so.
    """
    with plain_errors():
        try:
            arrow = arrow_schema(schema)
            config = with_group_function(parse_sink_options(options), arrow)
            check_schema(config, arrow)
        except ConfigError as exc:
            raise ConfigError(f"ordered-agg sink options (checked when Spark planned the first "
                              f"micro-batch; Spark calls a Python sink only after start() "
                              f"returned): {exc}") from exc
        SinkCommitter(config).claim()  # another query's stateLocation or path fails here
        return OrderedAggStreamWriter(config)


def partition_for_sink(df: Any, options: Mapping[str, str],
                       partitions: int | None = None) -> Any:
    """Repartition a stream so each partition group's rows reach exactly one write task.

    Parameters
    ----------
    df:
        The streaming DataFrame to be written with ``writeStream.format("ordered-agg")``.
    options:
        The sink options (``keyColumns`` and ``partitionGroups`` decide the groups).
    partitions:
        Number of write tasks (Spark's shuffle partitions); default
        ``spark.sql.shuffle.partitions``.

    Notes
    -----
    Each row's partition group is the one the sink's state uses (read from its location), and
    ``repartition`` moves the rows by it, so every group is merged and aggregated by one task.
    Spark computes it as ``pmod(hash(keys), partitionGroups)``
    (``runtime/distribution/murmur3.py``); the keys of a state started before states recorded
    their function are tagged in a Python ``mapInArrow`` step (docs/sink.md). Without this
    function the sink stays correct, but a group whose rows reach several tasks is merged on the
    driver (``groups_on_driver`` in the commit record). The group column is dropped again before
    the sink; so are, before the shuffle, the columns the query does not use
    (``SinkConfig.stream_columns``).
    """
    schema = arrow_schema(df.schema)
    config = with_group_function(parse_sink_options(options), schema)
    keys, groups, used = config.key_columns, config.partition_groups, config.stream_columns(schema)
    df = df.select(*used) if len(used) < len(df.columns) else df
    column = "__ordered_agg_group"
    if config.spec.group_function == "murmur3":
        tagged = _with_group_by_spark_hash(df, keys, groups, column)
    else:
        tagged = _with_group_in_python(df, keys, groups, column)
    # an explicit count: without one, adaptive execution may coalesce the shuffle into a
    # single partition, i.e. one write task doing every group's work
    count = partitions or int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    return tagged.repartition(count, column).drop(column)


#: Name of the observation ``partition_for_sink`` adds where Spark computes the groups: the
#: rows it partitioned, in ``query.lastProgress.observedMetrics`` (``{"rows": n}``).
PARTITIONED_ROWS = "ordered_agg_partitioned"


def _with_group_by_spark_hash(df: Any, keys: Sequence[str], groups: int, column: str) -> Any:
    """``df`` with each row's group as Spark's ``pmod(hash(keys), groups)`` (``murmur3``)."""
    from pyspark.sql import functions as f

    quoted = [f.col("`" + k.replace("`", "``") + "`") for k in keys]
    group = f.pmod(f.hash(*quoted), f.lit(groups)) if keys else f.lit(0)
    return df.observe(PARTITIONED_ROWS, f.count(f.lit(1)).alias("rows")).withColumn(column, group)


def _with_group_in_python(df: Any, keys: Sequence[str], groups: int, column: str) -> Any:
    """``df`` with each row's group computed in a Python ``mapInArrow`` step."""
    from pyspark.sql.types import IntegerType, StructField

    from spark_stream_sched.runtime.distribution.groups import group_of_rows

    schema = StructType([*df.schema.fields, StructField(column, IntegerType(), False)])

    def with_group(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = group_of_rows(pa.Table.from_batches([batch]), keys, groups)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(ids, pa.int32())], [*batch.schema.names, column])

    return df.mapInArrow(with_group, schema)


def finish_sink(options: Mapping[str, str]) -> dict[str, Any] | None:
    """Finish every input of a stopped sink query and write its last windows; idempotent.

    Parameters
    ----------
    options:
        The options the query was started with (including ``checkpointLocation`` when
        ``stateLocation`` was not given).

    Notes
    -----
    Called on the driver after the query has stopped (e.g. ``Trigger.AvailableNow`` done). It
    is the sink's "input finished" signal for bounded jobs; afterwards the sink refuses more
    batches.
    """
    return SinkCommitter(with_group_function(parse_sink_options(options))).finish()
