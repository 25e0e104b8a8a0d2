"""The ``ordered-agg`` streaming source: N file streams → S-Merge → ordered window aggregates.

``spark.readStream.format("ordered-agg").option(...).load()`` (options: ``options/source.py``;
user guide: docs/source.md) yields ``window_start, window_end, <key columns>, <aggregate
aliases>`` rows, identical on every run, for every ``maxRecordsPerTrigger`` and after restarts
(DESIGN.md §2). The same registered format also writes (the sink of ``spark/sink.py``).

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
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_stream_sched import inputs
from spark_stream_sched.faults import crash_point
from spark_stream_sched.inputs import Cursor, FileManifest
from spark_stream_sched.inputs import split as read_once
from spark_stream_sched.inputs.cursors import EventTimeCache
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
    empty_input_message,
    files_between,
    files_from,
    mark_idle,
    rows_between,
)
from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.distribution.loads import can_spill
from spark_stream_sched.runtime.distribution.manager import batch_assignment
from spark_stream_sched.runtime.engine.batch import query_hold
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.runtime.state.store import BatchStore
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.spark.source_plan import GroupRangePartition, to_spark
from spark_stream_sched.spark.worker_errors import reported

log = logging.getLogger(__name__)

#: State versions kept before the committed one (for replays and inspection).
KEEP_OLDER_VERSIONS = 2

__all__ = ["OrderedAggDataSource", "OrderedAggStreamReader", "empty_input_message"]


class OrderedAggStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets, admission control, partitioning and the stateless ``read()``.

    Notes
    -----
    ``initialOffset``, ``latestOffset``, ``getDefaultReadLimit``, ``partitions``, ``commit`` and
    ``prepareForTriggerAvailableNow`` run on the driver in one long-lived process; the first of
    them takes the state location's lock and loads the input manifests (not ``__init__``: Spark's
    planner worker also creates a reader, to pickle it for ``read()``). ``read()`` runs on
    executors on a pickled copy of this object and is stateless: all it needs comes from the
    partition and the state files.
    """

    def __init__(self, plan: SourcePlan, schema: StructType) -> None:
        self._plan = plan
        self._schema = schema
        #: per input, how many manifest files Trigger.AvailableNow froze (None: not frozen)
        self._frozen_lengths: list[int] | None = None
        self._manifests: list[FileManifest] | None = None
        self._lock = LocationLock(plan.config.state_location)
        self._planned = 0  # batches planned by this driver process (crash point ``batch``)
        #: input id -> clock reading when the driver last saw new rows of the input (or, after
        #: a restart, first saw none)
        self._quiet_since: dict[int, float] = {}
        self._clock = time.monotonic  # replaced by tests
        self._empty_reported = False  # inputs without files are reported once per process
        #: timestamps peeked by latestOffset, kept across batches (driver only)
        self._ts_cache: EventTimeCache | None = EventTimeCache()

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver's lock and manifests (executors never need them)."""
        state = dict(self.__dict__)
        state.update(_manifests=None, _lock=LocationLock(self._plan.config.state_location),
                     _ts_cache=None)
        return state

    # -- driver --------------------------------------------------------------------------------

    def _driver_manifests(self) -> list[FileManifest]:
        """Take the state location's lock and load the input manifests (first driver call)."""
        if self._manifests is None:
            self._lock.acquire()
            c = self._plan.config
            self._manifests = [FileManifest(c.state_location, j, path)
                               for j, path in enumerate(c.inputs)]
        return self._manifests

    def _sync_manifests(self, late_files: str, admit_new: bool) -> None:
        """Append newly listed files to the manifests; handle late files by ``late_files``."""
        for manifest in self._driver_manifests():
            manifest.sync(inputs.list_files(manifest.input_path), late_files, admit_new)

    @reported
    def initialOffset(self) -> dict[str, Any]:
        """Offset before the first row of every input."""
        self._driver_manifests()
        return Offset.initial(self._plan.config.n_inputs).to_json()

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
        if (self._frozen_lengths is not None and not self._plan.max_records_explicit
                and budget == c.max_records_per_trigger and budget is not None):
            return max(budget, AVAILABLE_NOW_MAX_RECORDS)
        return budget

    @reported
    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze each input's manifest length: the query stops at the data present now.

        Files present now are appended to the manifests first. Late files are skipped now with
        ``lateFiles=skip``; with ``fail`` they are reported by the next ``latestOffset``, so a
        batch Spark replays first (it was planned before the crash) still completes.
        """
        late_files = "skip" if self._plan.config.late_files == "skip" else "defer"
        self._sync_manifests(late_files, admit_new=True)
        self._frozen_lengths = [len(m.admitted) for m in self._driver_manifests()]
        log.info("Trigger.AvailableNow: %s files frozen", self._frozen_lengths)
        if self._plan.config.end_of_input == "never":
            log.warning("Trigger.AvailableNow with endOfInput=never: the query stops at the "
                        "files present now but the last windows stay open, waiting for rows "
                        "of a later run; set option endOfInput=availableNow to flush the last "
                        "windows at the end of this run")
        self._report_empty_inputs()

    def _report_empty_inputs(self) -> None:
        """Warn once per driver process about inputs that hold no file (see the module doc)."""
        if self._empty_reported:
            return
        self._empty_reported = True
        available_now = self._frozen_lengths is not None
        for j, manifest in enumerate(self._driver_manifests()):
            if not manifest.admitted:
                log.warning("%s", empty_input_message(j, manifest.input_path,
                                                      self._plan.config.end_of_input,
                                                      available_now))

    def _files(self, input_id: int) -> list[str]:
        """The manifest's files of one input (up to the frozen length under AvailableNow)."""
        admitted = self._driver_manifests()[input_id].admitted
        if self._frozen_lengths is not None:
            return admitted[: self._frozen_lengths[input_id]]
        return admitted

    def _check_unread_files(self, files: list[list[str]], cursors: Sequence[Cursor]) -> None:
        """Refuse admitted files that changed size, from each cursor's file onward."""
        for manifest, names, cursor in zip(self._driver_manifests(), files, cursors, strict=True):
            if not cursor.finished:
                manifest.check_unchanged(files_from(names, cursor.file))

    @reported
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Advance the cursors by at most the limit's rows: the earliest rows over all inputs.

        See :func:`~spark_stream_sched.inputs.time_aligned_shares`; with
        ``ReadAllAvailable`` (``maxRecordsPerTrigger=0`` or the engine's choice) every listed
        row is admitted.
        """
        c = self._plan.config
        offset = parse_offset(start, c.n_inputs)
        budget = self._budget(limit)
        # Durable before the offset that refers to the files is returned (and logged by Spark).
        self._sync_manifests(c.late_files, admit_new=self._frozen_lengths is None)
        self._report_empty_inputs()
        streams, cursors = self._plan.streams, offset.cursors
        files = [self._files(j) for j in range(c.n_inputs)]
        self._check_unread_files(files, cursors)
        avail = [0 if cur.finished else inputs.available_rows(files[j], cur, c.format, budget,
                                                              streams[j])
                 for j, cur in enumerate(cursors)]
        shares = avail
        heads: list[Any] = [None] * c.n_inputs
        if budget is not None:  # admit the earliest rows; their ts are reused by advance()
            cache = self._ts_cache if self._ts_cache is not None else EventTimeCache()
            for j, cursor in enumerate(cursors):
                cache.forget_before(files[j], cursor)
            peeked = [inputs.peek_event_times(s, files[j], cursors[j], avail[j],
                                              c.timestamp_column, cache)
                      for j, s in enumerate(streams)]
            shares = inputs.time_aligned_shares(peeked, [cur.last_ts for cur in cursors],
                                                   budget)
            heads = [p[:n] for p, n in zip(peeked, shares, strict=True)]
        finish = c.end_of_input == "exhausted" or (
            c.end_of_input == "availableNow" and self._frozen_lengths is not None)
        cursors = tuple(
            inputs.advance(stream, files[j], cursors[j], shares[j], c.timestamp_column,
                              c.out_of_order, finish, heads[j])
            for j, stream in enumerate(streams))
        cursors = self._mark_idle(offset.cursors, cursors)
        for j, stream in enumerate(self._plan.streams):
            inputs.warn_ignored_files(stream, files[j], cursors[j])
        return Offset(cursors).to_json()

    def _mark_idle(self, before: tuple[Cursor, ...],
                   after: tuple[Cursor, ...]) -> tuple[Cursor, ...]:
        """Record in the end offset which inputs are idle (:func:`.source_plan.mark_idle`)."""
        timeout = self._plan.config.idle_timeout_ms
        if timeout is None:
            return after
        return mark_idle(before, after, self._quiet_since, self._clock(), timeout)

    @reported
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One partition per range of partition groups; ``[]`` for an empty batch.

        The files come from the input manifests, never from a fresh listing: a batch that Spark
        replays after a crash reads exactly the files and rows it planned. Late files are not
        looked for here (the next ``latestOffset`` reports them), so the replay completes.
        """
        c = self._plan.config
        first, last = parse_offset(start, c.n_inputs), parse_offset(end, c.n_inputs)
        crash_point("source.planned", batch=self._planned, seq=last.total_seq)
        self._planned += 1
        if first == last:
            return []
        manifests = self._driver_manifests()
        for manifest, cursor in zip(manifests, last.cursors, strict=True):
            if cursor.file is not None and not manifest.entries:  # state from before manifests
                manifest.sync(inputs.list_files(manifest.input_path), "defer")
        files = tuple(files_between(m.admitted, first.cursors[j].file, last.cursors[j].file)
                      for j, m in enumerate(manifests))
        for manifest, batch_files in zip(manifests, files, strict=True):
            manifest.check_unchanged(batch_files)
        skipped = sum(m.skipped_count for m in manifests)
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
        initial = first == Offset.initial(c.n_inputs)
        start_version = None if initial else version_id(first)
        chosen = batch_assignment(c.state_location, start_version, version_id(last),
                                  c.partition_groups, min(c.num_partitions, c.partition_groups),
                                  c.adaptation, can_spill(c.spec))
        store = FileStateStore(c.state_location, cache=None)
        store.forget(version_id(last))
        entries = {} if start_version is None else store.entries(start_version)
        hold = query_hold(entries, first.ready_bound(), bool(chosen.pushes))
        split = read_once.split_batch(self._plan, files, first, last, chosen.tasks,
                                      chosen.groups)
        return [GroupRangePartition(i, chosen.groups_of(i), start, end, files, skipped,
                                    split.paths[i], split.rows_total, split.late_dropped,
                                    tuple(g for g in chosen.pushes if chosen.groups[g] == i),
                                    hold)
                for i in range(chosen.tasks)]

    @reported
    def commit(self, end: dict[str, Any]) -> None:
        """Prune state versions older than ``end`` (the last few are kept); merge the metrics.

        The batch's partition metrics become ``<stateLocation>/metrics/batch-<id>.json``
        (``runtime/state/batch_metrics.py``); a metrics file that cannot be written or read
        is logged as a warning and does not stop the query.
        """
        self._driver_manifests()
        c = self._plan.config
        version = version_id(parse_offset(end, c.n_inputs))
        deleted = FileStateStore(c.state_location, cache=None).prune(version, KEEP_OLDER_VERSIONS)
        read_once.prune(c.state_location, version)
        assignments.prune(c.state_location, version)
        log.debug("commit %s: pruned %d old state versions", version, deleted)
        try:
            merged = batch_metrics.merge_batch(c.state_location, version)
            batch_metrics.prune(c.state_location, version)
        except (OSError, ValueError) as exc:
            log.warning("cannot merge the metrics of version %s under %s: %s; the query goes "
                        "on, the report lacks this batch", version,
                        batch_metrics.metrics_dir(c.state_location), exc)
            return
        if merged is not None:
            log.info("ordered-agg batch %s: %s", merged["batch_id"],
                     json.dumps(merged, sort_keys=True))

    @reported
    def stop(self) -> None:
        """Release the state location's lock (called by Spark when the query terminates).

        Notes
        -----
        pyspark's source runner parses the offsets Spark hands it (JSON text from the
        checkpoint's offset log) before calling this reader, and calls ``stop()`` in a
        ``finally`` clause when it ends. If it is ending because that text is not JSON (a
        truncated or corrupt offset file), the bare ``JSONDecodeError`` is replaced here by a
        :class:`~spark_stream_sched.errors.StateError` naming the offset log and what to do.
        """
        if self._manifests is not None:  # this process planned batches: drop their rows
            read_once.prune(self._plan.config.state_location, None)
        self._lock.release()
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
        started = time.perf_counter()
        n, location = self._plan.config.n_inputs, self._plan.config.state_location
        start, end = parse_offset(partition.start, n), parse_offset(partition.end, n)
        rows = (read_once.read_task_rows(partition.rows_file)
                if partition.rows_file is not None else None)
        if rows is None:  # planned without the split (or its file is gone): read and keep ours
            rows = read_once.own_rows(self._plan, partition.groups,
                                      rows_between(self._plan, partition.files, start, end))
        files = FileStateStore(location, cache_budget=self._plan.config.adaptation.budget)
        initial = start == Offset.initial(n)
        store = BatchStore(files, None if initial else files.entries(version_id(start)),
                           version_id(end), f"t{partition.index:04d}",
                           where=f"state version {version_id(start)}")
        result = self._plan.batch(partition.groups, partition.pushes).run(
            rows, store, start.ready_bound(), end.ready_bound(), partition.hold)
        result.metrics.update(store.metrics, state_cache_hits=files.cache_hits,
                              task=partition.index,
                              worker=batch_metrics.worker_identity())
        if partition.rows_total is not None:  # the batch's figures, not this task's share
            result.metrics.update(rows_read=partition.rows_total,
                                  late_dropped=partition.late_dropped)
        crash_point("source.state_written", batch=_spark_batch_id(), partition=partition.index,
                    seq=end.total_seq)
        batch_id = _spark_batch_id()
        result.metrics.update(seconds=round(time.perf_counter() - started, 4),
                              late_files_skipped=partition.late_files_skipped,
                              batch_id=None if batch_id is None else int(batch_id),
                              newest_ts=end.newest_ts, lag_ms=lag_ms(end))
        log.info("ordered-agg partition %d of batch %s: %s", partition.index, version_id(end),
                 json.dumps(result.metrics, sort_keys=True))
        batch_metrics.write_part(location, version_id(end), partition.index, result.metrics)
        if result.output.num_rows:
            arrow_schema = to_arrow_schema(self._schema, timezone="UTC")
            yield from to_spark(result.output, arrow_schema, self._plan.ts_is_timestamp
                                 ).to_batches(max_chunksize=OUTPUT_BATCH_ROWS)


def _spark_batch_id() -> str | None:
    """Spark's id of the micro-batch this task belongs to (None outside a streaming task)."""
    context = TaskContext.get()
    return context.getLocalProperty("streaming.sql.batchId") if context is not None else None
