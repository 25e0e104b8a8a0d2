"""The ``ordered-agg`` streaming source: N file streams → S-Merge → ordered window aggregates.

``spark.readStream.format("ordered-agg").option(...).load()`` (options: ``options/source.py``;
user guide: docs/source.md) yields ``window_start, window_end, <key columns>, <aggregate
aliases>`` rows, identical on every run, for every ``maxRecordsPerTrigger`` and after restarts
(README, "Semantics"). The same registered format also writes (the sink of ``spark/sink.py``).

A micro-batch:

* driver, ``latestOffset(start, limit)``: append newly listed files to each input's durable
  manifest (``inputs/manifest.py``, option ``lateFiles``), then advance each cursor by its share
  of the row limit, the earliest rows over all inputs (``inputs/cursors.py``; the timestamps
  peeked at are cached in this long-lived reader, :class:`~.cursors.EventTimeCache`). The end
  offset records each input's largest event time, so ``R = min_j last_ts(j)`` is a function of
  the offset alone;
* driver, ``partitions(start, end)``: the manifest's files between the offsets (never a fresh
  listing); the batch's rows are read **once**, and each task's rows are written to its own file
  (``inputs/split.py``); one partition per task, running a range of partition groups or,
  under distributed adaptation, the groups the batch's recorded assignment gives it
  (:mod:`spark_stream_sched.runtime.distribution`);
* executor, ``read(partition)``: the task's rows through the runtime's one micro-batch entry,
  :class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch` (per group: load state version
  ``start``, release rows with ``ts < R`` in the total order ``(ts, input, seq)``, write version
  ``end``), yielding the closed windows as Arrow batches of Spark's schema, each partition ordered
  by ``(window_end, window_start, keys)`` (Spark does not order rows across partitions);
* driver, ``commit(end)``: prune state versions, per-task rows and old assignment records up
  to ``end``; merge the batch's metrics files (``runtime/state/batch_metrics.py``).

``endOfInput`` (``exhausted`` / ``availableNow``) marks inputs finished so the last windows flush.
One query per ``stateLocation``: the driver holds ``<stateLocation>/_lock`` from its first driver
call until the query stops.

Crash points (:mod:`spark_stream_sched.faults`): ``source.planned`` at the start of
``partitions()`` (right
after Spark logged the end offset), with ``batch`` = batches this driver process planned before
and ``seq`` = the end offset's row count; ``source.state_written`` after a partition wrote its
groups' state, with ``batch`` = Spark's batch id, ``partition`` and ``seq``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark_stream_sched.faults import crash_point
from spark_stream_sched.inputs import split as read_once
from spark_stream_sched.inputs.driver import SourceDriver
from spark_stream_sched.inputs.offsets import (
    Offset,
    lag_ms,
    parse_offset,
    unreadable_offset,
    version_id,
)
from spark_stream_sched.inputs.plan import (
    AVAILABLE_NOW_MAX_RECORDS,
    OUTPUT_BATCH_ROWS,
    SourcePlan,
    rows_between,
)
from spark_stream_sched.runtime.distribution.loads import can_spill
from spark_stream_sched.runtime.distribution.manager import batch_assignment
from spark_stream_sched.runtime.engine.batch import query_hold
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.state.store import BatchStore
from spark_stream_sched.runtime.state.usage import rss_figure
from spark_stream_sched.spark.compat import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
    arrow_schema,
)
from spark_stream_sched.spark.source_plan import GroupRangePartition, to_spark
from spark_stream_sched.spark.worker_errors import reported

log = logging.getLogger(__name__)

__all__ = ["OrderedAggStreamReader"]


class OrderedAggStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets, admission control, partitioning and the stateless ``read()``.

    Notes
    -----
    ``initialOffset``, ``latestOffset``, ``getDefaultReadLimit``, ``partitions``, ``commit`` and
    ``prepareForTriggerAvailableNow`` run on the driver in one long-lived process, where a
    :class:`~spark_stream_sched.inputs.driver.SourceDriver` keeps the books (its first use takes
    the state location's lock and loads the input manifests -- not ``__init__``: Spark's planner
    worker also creates a reader, to pickle it for ``read()``). ``read()`` runs on executors on a
    pickled copy of this object and is stateless: all it needs comes from the partition and the
    state files.
    """

    def __init__(self, plan: SourcePlan, schema: StructType) -> None:
        self._plan = plan
        self._schema = schema
        self._driver: SourceDriver | None = SourceDriver(plan)
        self._planned = 0  # batches planned by this driver process (crash point ``batch``)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver's books (executors never need them)."""
        return {**self.__dict__, "_driver": None}

    @property
    def driver(self) -> SourceDriver:
        """The driver's books (only on the driver)."""
        assert self._driver is not None, "driver calls on an executor's copy of the reader"
        return self._driver

    # -- driver --------------------------------------------------------------------------------

    @reported
    def initialOffset(self) -> dict[str, Any]:
        """Offset before the first row of every input, carrying a new owner token.

        Spark asks for it only with a fresh checkpoint; a state location that already planned
        a batch for another checkpoint is refused here, naming both queries
        (:mod:`~spark_stream_sched.runtime.state.owner`).
        """
        return self.driver.fresh_offset().to_json()

    @reported
    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxRecordsPerTrigger)``, or everything when the option is 0.

        Under ``Trigger.AvailableNow`` without an explicit ``maxRecordsPerTrigger`` the larger
        ``AVAILABLE_NOW_MAX_RECORDS`` (see :meth:`_budget`).
        """
        limit = self._budget(None)
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def _budget(self, limit: ReadLimit | None) -> int | None:
        """Rows to admit for Spark's ``limit`` (None: everything available).

        A catch-up run (``Trigger.AvailableNow``) that did not set ``maxRecordsPerTrigger``
        admits ``AVAILABLE_NOW_MAX_RECORDS`` rows per micro-batch instead of the streaming
        default: its time is dominated by the fixed cost per micro-batch. Called on the driver.
        """
        c = self._plan.config
        budget = c.max_records_per_trigger
        if isinstance(limit, ReadMaxRows):
            budget = limit.max_rows
        elif isinstance(limit, ReadAllAvailable):
            return None
        if (self.driver.frozen is not None and not self._plan.max_records_explicit
                and budget == c.max_records_per_trigger and budget is not None):
            return max(budget, AVAILABLE_NOW_MAX_RECORDS)
        return budget

    @reported
    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze each input's manifest length: the query stops at the data present now."""
        self.driver.freeze()

    @reported
    def latestOffset(self, start: dict[str, Any] | None = None,
                     limit: ReadLimit | None = None) -> dict[str, Any]:
        """Advance the cursors by at most the limit's rows: the earliest rows over all inputs.

        See :func:`~spark_stream_sched.inputs.admission.admit`; with ``ReadAllAvailable``
        (``maxRecordsPerTrigger=0`` or the engine's choice) every listed row is admitted.
        pyspark before 4.2 passes neither argument: the driver then starts from where Spark
        stands and caps the batch by ``maxRecordsPerTrigger`` itself
        (:meth:`~spark_stream_sched.inputs.driver.SourceDriver.next_offset_unprompted`).
        """
        if start is None:
            return self.driver.next_offset_unprompted(self._budget(None)).to_json()
        offset = parse_offset(start, self._plan.config.n_inputs)
        return self.driver.next_offset(offset, self._budget(limit)).to_json()

    @reported
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per task of the batch's assignment; ``[]`` for an empty batch.

        The files come from the input manifests, never from a fresh listing: a batch that Spark
        replays after a crash reads exactly the files and rows it planned. Late files are not
        looked for here (the next ``latestOffset`` reports them), so the replay completes.
        """
        c = self._plan.config
        first, last = parse_offset(start, c.n_inputs), parse_offset(end, c.n_inputs)
        crash_point("source.planned", batch=self._planned, seq=last.total_seq)
        self._planned += 1
        self.driver.spark_reached(last)
        if first == last:  # nothing to read (pyspark < 4.2 names its position this way)
            return []
        files, skipped = self.driver.batch_files(first, last)
        return self._tasks(start, end, first, last, files, skipped)

    def _tasks(self, start: dict[str, Any], end: dict[str, Any], first: Offset, last: Offset,
               files: tuple[tuple[str, ...], ...], skipped: int) -> list[GroupRangePartition]:
        """One partition per task, by the batch's assignment; the rows split once by task.

        The assignment (recorded, or the distribution manager's, or ranges) comes from
        :func:`~spark_stream_sched.runtime.distribution.manager.batch_assignment`; manifests an
        earlier attempt of the batch left in its version are dropped (the tasks rewrite them);
        the query's hold bound comes from the start version's manifests.
        """
        c = self._plan.config
        start_version = None if first == Offset.initial(c.n_inputs) else version_id(first)
        chosen = batch_assignment(c.state_location, start_version, version_id(last),
                                  c.partition_groups, min(c.num_partitions, c.partition_groups),
                                  c.adaptation, can_spill(c.spec))
        store = FileStateStore(c.state_location, cache=None)
        store.forget(version_id(last))
        entries = {} if start_version is None else store.entries(start_version)
        hold = query_hold(entries, first.ready_bound(), bool(chosen.pushes))
        split = (read_once.split_batch(self._plan, files, first, last, chosen.tasks,
                                       chosen.groups)
                 if c.split_rows == "driver" else None)  # splitRows=tasks: each task reads
        return [GroupRangePartition(i, chosen.groups_of(i), start, end, files, skipped,
                                    None if split is None else split.paths[i],
                                    None if split is None else split.rows_total,
                                    0 if split is None else split.late_dropped,
                                    tuple(g for g in chosen.pushes if chosen.groups[g] == i),
                                    hold)
                for i in range(chosen.tasks)]

    @reported
    def commit(self, end: dict[str, Any]) -> None:
        """Prune what the batch ending at ``end`` made obsolete; merge its metrics.

        The batch's partition metrics become ``<stateLocation>/metrics/batch-<id>.json``
        (``runtime/state/batch_metrics.py``); a metrics file that cannot be written or read
        is logged as a warning and does not stop the query. Spark calls this when it has
        logged the *next* batch's offsets, so the last batch of a run is committed only by the
        next run (docs/state_store.md, "Retention"). Nothing waits for it: the files that batch
        read to the end may be deleted before the next run (``inputs/consumed.py``).
        """
        self.driver.committed(parse_offset(end, self._plan.config.n_inputs))

    @reported
    def stop(self) -> None:
        """Release the state location's lock.

        Notes
        -----
        pyspark 4.3 calls this only when the source runner ends on an error of its own: a
        query that stops (or finishes a ``Trigger.AvailableNow`` run) ends the runner's
        process without it, and the kernel releases the lock. Nothing else depends on it.

        pyspark's source runner parses the offsets Spark hands it (JSON text from the
        checkpoint's offset log) before calling this reader, and calls ``stop()`` in a
        ``finally`` clause when it ends. If it is ending because that text is not JSON (a
        truncated or corrupt offset file), the bare ``JSONDecodeError`` is replaced here by a
        :class:`~spark_stream_sched.errors.StateError` naming the offset log and what to do.
        """
        self.driver.close()
        failure = sys.exc_info()[1]
        if isinstance(failure, json.JSONDecodeError):
            raise unreadable_offset(failure) from failure

    # -- executors -----------------------------------------------------------------------------

    @reported
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Run the partition's groups from version ``start`` to ``end``; yield closed windows.

        A translation: offsets -> rows -> :meth:`GroupedBatch.run` -> Arrow batches of Spark's
        schema; all the work is the runtime's (``runtime/engine/batch.py``).
        """
        assert isinstance(partition, GroupRangePartition)
        started, wall_started = time.perf_counter(), time.time()
        n, location = self._plan.config.n_inputs, self._plan.config.state_location
        start, end = parse_offset(partition.start, n), parse_offset(partition.end, n)
        rows = (read_once.read_task_rows(partition.rows_file)
                if partition.rows_file is not None else None)
        if rows is None:  # splitRows=tasks (or the split file is gone): the batch's rows,
            rows = rows_between(self._plan, partition.files, start, end,  # run keeps ours;
                                warn=partition.index == 0)  # drops are logged by one task
        files = FileStateStore(location, cache_budget=self._plan.config.adaptation.budget)
        initial = start == Offset.initial(n)
        store = BatchStore(files, None if initial else files.entries(version_id(start)),
                           version_id(end), f"t{partition.index:04d}",
                           where=f"state version {version_id(start)}")
        result = self._plan.batch(partition.groups, partition.pushes).run(
            rows, store, start.ready_bound(), end.ready_bound(), partition.hold)
        result.metrics.update(store.metrics, state_cache_hits=files.cache_hits,
                              task=partition.index,
                              worker=batch_metrics.worker_identity(),
                              **rss_figure("worker_rss_bytes"))
        if partition.rows_total is not None:  # the batch's figures, not this task's share
            result.metrics.update(rows_read=partition.rows_total,
                                  late_dropped=partition.late_dropped)
        crash_point("source.state_written", batch=_spark_batch_id(), partition=partition.index,
                    seq=end.total_seq)
        batch_id = _spark_batch_id()
        result.metrics.update(seconds=round(time.perf_counter() - started, 4),
                              started_at=round(wall_started, 3), ended_at=round(time.time(), 3),
                              late_files_skipped=partition.late_files_skipped,
                              batch_id=None if batch_id is None else int(batch_id),
                              newest_ts=end.newest_ts, lag_ms=lag_ms(end))
        log.info("ordered-agg partition %d of batch %s: %s", partition.index, version_id(end),
                 json.dumps(result.metrics, sort_keys=True))
        batch_metrics.write_part(location, version_id(end), partition.index, result.metrics)
        if result.output.num_rows:
            spark_rows = to_spark(result.output, arrow_schema(self._schema),
                                  self._plan.ts_is_timestamp)
            yield from spark_rows.to_batches(max_chunksize=OUTPUT_BATCH_ROWS)


def _spark_batch_id() -> str | None:
    """Spark's id of the micro-batch this task belongs to (None outside a streaming task)."""
    context = TaskContext.get()
    return context.getLocalProperty("streaming.sql.batchId") if context is not None else None
