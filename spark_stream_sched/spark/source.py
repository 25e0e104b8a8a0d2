"""The ``ordered-agg`` streaming source: N file streams → S-Merge → ordered window aggregates.

``spark.readStream.format("ordered-agg").option(...).load()`` (options: ``spark/options.py``)
yields ``window_start, window_end, <key columns>, <aggregate aliases>`` rows, identical on every
run, for every ``maxRecordsPerTrigger`` and after restarts (DESIGN.md §2). The same registered
format also writes: ``df.writeStream.format("ordered-agg")`` is the sink of ``spark/sink.py``.

How a micro-batch runs:

* driver, ``latestOffset(start, limit)``: list each input, append the new files to the input's
  durable manifest (``inputs/manifest.py``; late-sorting files fail or are skipped, option
  ``lateFiles``), then advance each input's cursor over the manifest's files by its fair share
  of the row limit (``inputs/cursors.py``); the end offset records each input's largest event time,
  so the ready bound ``R = min_j last_ts(j)`` is a function of the offset alone;
* driver, ``partitions(start, end)``: one partition per range of partition groups, carrying the
  two offsets and the manifest's files between them — never a fresh listing, so a replayed
  batch reads exactly the files and rows it planned;
* executor, ``read(partition)``: read the rows between the offsets and hand them to the
  runtime's one micro-batch entry, :class:`~spark_stream_sched.runtime.query.batch.GroupedBatch`
  (keep the rows of the partition's groups; per group load state version ``start``, release
  the rows with ``ts < R`` in the total order ``(ts, input, seq)`` into the window operator,
  write state version ``end``), then yield the closed windows as Arrow record batches of
  Spark's schema;
* driver, ``commit(end)``: prune state versions older than ``end`` (keeping a few) and merge
  the batch's metrics files (``runtime/state/batch_metrics.py``; docs/source.md "Metrics").

Output order: each partition yields its rows ordered by ``(window_end, window_start, keys)``;
Spark does not order rows across the partitions of one micro-batch, so a consumer that needs
the whole batch in that order sorts it (or sets ``numPartitions=1``). Windows never straddle
micro-batches out of order: every window emitted in batch ``b`` ends at or before the ready
bound of ``b`` and every later one after it, so "batch id, then sorted rows" is the same
sequence for every ``maxRecordsPerTrigger``.

End of input: with option ``endOfInput`` an input counts as finished once its files are consumed
(``exhausted``: every file listed so far; ``availableNow``: every file present when a
``Trigger.AvailableNow`` query started). Once every input has finished, ``R`` is +infinity and
the last windows are flushed. With the default ``never`` the last windows stay open, waiting for
more files, as Spark's own watermarked windows do.

One query per ``stateLocation``: the driver process holds ``<stateLocation>/_lock``
(``runtime/state/lock.py``) from its first driver call until the query stops; a second query
on the same location fails before planning anything, naming the holder.

Crash points (``testing/faults.py``): ``source.planned`` at the start of ``partitions()``, i.e.
right after Spark logged the batch's end offset, with ``batch`` = the number of batches this
driver process planned before (equal to Spark's batch id for a fresh query in one process) and
``seq`` = the end offset's total row count; ``source.state_written`` after a partition wrote
its groups' state, with ``batch`` = Spark's batch id (``streaming.sql.batchId``), ``partition``
and ``seq``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from spark_stream_sched import inputs
from spark_stream_sched.errors import SparkStreamSchedError
from spark_stream_sched.inputs import Cursor, FileManifest
from spark_stream_sched.runtime.keys import group_range_for_task
from spark_stream_sched.runtime.query.recorded import check_recorded, record_spec
from spark_stream_sched.runtime.state import batch_metrics, versions
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.spark.offsets import (
    Offset,
    lag_ms,
    parse_offset,
    unreadable_offset,
    version_id,
)
from spark_stream_sched.spark.source_plan import (
    OUTPUT_BATCH_ROWS,
    GroupRangePartition,
    SourcePlan,
    build_plan,
    check_schema_matches,
    rows_between,
    to_spark,
)
from spark_stream_sched.spark.worker_errors import (
    RefusedStreamReader,
    plain_errors,
    reported,
)
from spark_stream_sched.testing.faults import crash_point

log = logging.getLogger(__name__)



# -- Spark data source -------------------------------------------------------------------------


class OrderedAggDataSource(DataSource):
    """``format("ordered-agg")``: deterministic merged, windowed aggregates of file streams.

    Notes
    -----
    ``schema()`` and ``streamReader()`` are called on the driver; they validate every option so
    a bad one fails when the query is defined or started.
    """

    @classmethod
    def name(cls) -> str:
        """Short name used in ``format(...)``."""
        return "ordered-agg"

    def schema(self) -> StructType:
        """Result schema: window bounds (type of the input event time), keys, aggregates.

        Also refuses, at ``load()``, a definition that differs from the one recorded under
        ``stateLocation`` (``runtime/query/recorded.py``).
        """
        with plain_errors():
            plan = build_plan(self.options, streaming=False)  # a batch read: no stateLocation
            if plan.config.state_location:
                check_recorded(plan.config.state_location, plan.config.spec)
            return from_arrow_schema(plan.output_arrow_schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("ordered-agg")``: the query over the files present now.

        Returns the batch reader of ``spark/batch.py`` (state in memory; ``stateLocation``
        is neither needed nor touched).
        """
        from spark_stream_sched.spark.batch import OrderedAggBatchReader

        with plain_errors():
            plan = build_plan(self.options, streaming=False)
            check_schema_matches(plan, schema)
            return OrderedAggBatchReader(plan, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Create the stream reader; records the query under ``stateLocation`` at first start.

        Notes
        -----
        Called on the driver in the query's thread, after ``start()`` returned. Errors found
        here (a stream without ``stateLocation``, a ``.schema()`` that differs from the
        result's) are raised by the reader's first driver call instead, before any data moves:
        pyspark 4.3's source runner would report an exception raised here as an unrelated
        ``UnboundLocalError`` (:class:`~.worker_errors.RefusedStreamReader`).
        """
        try:
            plan = build_plan(self.options)
            check_schema_matches(plan, schema)
            record_spec(plan.config.state_location, plan.config.spec)
        except SparkStreamSchedError as exc:
            return RefusedStreamReader(exc)
        return OrderedAggStreamReader(plan, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("ordered-agg")``: the sink of ``spark/sink.py``.

        Defined here so that the one auto-registered ``ordered-agg`` format both reads and
        writes; the sink's options and contract are documented in that module.
        """
        from spark_stream_sched.spark.sink import make_stream_writer

        return make_stream_writer(self.options, schema)


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

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver's lock and manifests (executors never need them)."""
        state = dict(self.__dict__)
        state.update(_manifests=None, _lock=LocationLock(self._plan.config.state_location))
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
        """``ReadMaxRows(maxRecordsPerTrigger)``, or everything when the option is 0."""
        limit = self._plan.config.max_records_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

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
                manifest.check_unchanged(_files_from(names, cursor.file))

    @reported
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Advance the cursors by at most the limit's rows: the earliest rows over all inputs.

        See :func:`~spark_stream_sched.inputs.time_aligned_shares`; with
        ``ReadAllAvailable`` (``maxRecordsPerTrigger=0`` or the engine's choice) every listed
        row is admitted.
        """
        c = self._plan.config
        offset = parse_offset(start, c.n_inputs)
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if not isinstance(limit, ReadMaxRows | ReadAllAvailable):
            budget = c.max_records_per_trigger
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
        heads: list[np.ndarray | None] = [None] * c.n_inputs
        if budget is not None:  # admit the earliest rows; their ts are reused by advance()
            peeked = [inputs.peek_event_times(s, files[j], cursors[j], avail[j],
                                                 c.timestamp_column)
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
        """Record in the end offset which inputs are idle (option ``idleTimeout``).

        An input is idle once it has had no new row for ``idleTimeout`` of wall-clock time on
        the driver; it stays idle (also across restarts, since the flag is in the offset) until
        its next row. The decision is part of the offset Spark logs before running the batch,
        so replays see the same ready bound.
        """
        timeout = self._plan.config.idle_timeout_ms
        if timeout is None:
            return after
        now = self._clock()
        marked = []
        for j, (old, new) in enumerate(zip(before, after, strict=True)):
            if new.finished or new.seq > old.seq:
                self._quiet_since[j] = now  # its latest row was seen now
                marked.append(replace(new, idle=False))
                continue
            since = self._quiet_since.setdefault(j, now)
            idle = old.idle or (now - since) * 1000 >= timeout
            if idle and not old.idle:
                log.info("input %d had no new row for %.1f s: idle (idleTimeout)", j, now - since)
            marked.append(replace(new, idle=idle))
        return tuple(marked)

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
        files = tuple(_files_between(m.admitted, first.cursors[j].file, last.cursors[j].file)
                      for j, m in enumerate(manifests))
        for manifest, batch_files in zip(manifests, files, strict=True):
            manifest.check_unchanged(batch_files)
        n_tasks = min(c.num_partitions, c.partition_groups)
        skipped = sum(m.skipped_count for m in manifests)
        return [GroupRangePartition(i, tuple(group_range_for_task(i, n_tasks, c.partition_groups)),
                                    start, end, files, skipped)
                for i in range(n_tasks)]

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
        deleted = versions.prune(c.state_location, version)
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
        self._lock.release()
        failure = sys.exc_info()[1]
        if isinstance(failure, json.JSONDecodeError):
            raise unreadable_offset(failure) from failure

    # -- executors -----------------------------------------------------------------------------

    @reported
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Run the partition's groups from version ``start`` to ``end``; yield closed windows.

        A translation: offsets -> rows -> :meth:`GroupedBatch.run` -> Arrow batches of Spark's
        schema; all the work is the runtime's (``runtime/query/batch.py``).
        """
        assert isinstance(partition, GroupRangePartition)
        started = time.perf_counter()
        n, location = self._plan.config.n_inputs, self._plan.config.state_location
        start, end = parse_offset(partition.start, n), parse_offset(partition.end, n)
        rows = rows_between(self._plan, partition.files, start, end)
        result = self._plan.batch(partition.groups).run(
            rows, _VersionStore(location, start, end), start.ready_bound(), end.ready_bound())
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


def empty_input_message(input_id: int, path: str, end_of_input: str,
                        available_now: bool) -> str:
    """What an input that holds no files when the query starts means, by ``endOfInput``."""
    head = f"input {input_id} ({path}) holds no files when the query starts: "
    if end_of_input == "exhausted" or (end_of_input == "availableNow" and available_now):
        return head + (f"with endOfInput={end_of_input} it counts as finished and empty, and "
                       f"files added to it later are ignored; check option inputs if it "
                       f"should hold data")
    return head + ("no window closes until it sends a row (the ready bound waits for every "
                   "unfinished input); add its files, or set option idleTimeout so that a "
                   "quiet input stops holding the others back")


def _spark_batch_id() -> str | None:
    """Spark's id of the micro-batch this task belongs to (None outside a streaming task)."""
    context = TaskContext.get()
    return context.getLocalProperty("streaming.sql.batchId") if context is not None else None


def _files_from(files: list[str], first: str | None) -> list[str]:
    """Files from ``first`` (the file a cursor is in; the beginning when None) onward."""
    return files[files.index(first):] if first in files else list(files)


def _files_between(files: list[str], first: str | None, last: str | None) -> tuple[str, ...]:
    """Files from ``first`` (or the beginning) through ``last`` (none when ``last`` is None)."""
    if last is None:
        return ()
    lo = files.index(first) if first in files else 0
    return tuple(f for f in files[lo:] if f <= last)


# -- one partition of one micro-batch (executor side) -----------------------------------------


class _VersionStore:
    """Group state of one batch: version ``start`` in, version ``end`` out (``GroupStore``)."""

    def __init__(self, location: str, start: Offset, end: Offset) -> None:
        self.location, self.start, self.end = location, start, end

    def load(self, group: int) -> versions.GroupState:
        """State of ``group`` at ``start`` (empty at the initial offset)."""
        if self.start == Offset.initial(len(self.start.cursors)):
            return versions.GroupState()
        return versions.load_group(self.location, group, version_id(self.start))

    def save(self, states: dict[int, versions.GroupState], meta: dict[str, Any]) -> None:
        """Write the groups' state as version ``end``."""
        versions.save_groups(self.location, version_id(self.end), states, meta)
