"""The ``ordered-agg`` source's books on the driver: input manifests, admission, housekeeping.

One :class:`SourceDriver` lives in Spark's long-lived driver-side source runner for the whole
query. On its first call it takes ``<stateLocation>/_lock`` (one query per location), removes
what an earlier run left behind (temporary files of interrupted writes, per-task rows of batches
it planned: every batch is planned again before it runs) and loads each input's durable
manifest (:class:`~spark_stream_sched.inputs.manifest.FileManifest`); then:

* :meth:`fresh_offset` / :meth:`check_owner` -- the owner record
  (:mod:`~spark_stream_sched.runtime.state.owner`): the initial offset of a fresh checkpoint
  carries a new owner token, and every offset Spark hands back must carry the location's token
  (another query's is refused, before anything is planned or written);
* :meth:`next_offset` -- ``latestOffset``: the per-task rows of the batch that ended at the
  start offset go (it ran: Spark plans a batch only after the previous one), the file each
  cursor is in must not have changed while the files after it are taken as they are now
  (:meth:`settle`), newly listed files enter the manifests (late files by option
  ``lateFiles``), each cursor advances by its share of the budget (:func:`~.admission.admit`),
  idle inputs are marked in the offset (:func:`~.plan.mark_idle`);
* :meth:`next_offset_unprompted` -- ``latestOffset()`` of a Spark without admission control
  for Python sources (pyspark 4.0 and 4.1): Spark passes neither the start nor a limit, so the
  driver caps the offset it reports itself, from where Spark stands (:meth:`spark_reached`);
* :meth:`batch_files` -- ``partitions``: the manifests' files between two offsets (never a fresh
  listing, so a replayed batch reads exactly what it planned);
* in both, a cursor whose file was deleted once read to the end is past it
  (:mod:`~spark_stream_sched.inputs.consumed`: the next run goes on after consumed files were
  removed);
* :meth:`freeze` -- ``Trigger.AvailableNow``: the query stops at the files present now;
* :meth:`committed` -- ``commit``: prune state versions, per-task rows, assignment records and
  metrics files (option ``keepMetrics``), fold the consumed prefix of the input manifests, and
  merge the batch's metrics;
* :meth:`close` -- ``stop``: drop the planned rows and release the lock. Spark 4.3 ends the
  source runner's process without calling ``stop()`` when a query stops (the kernel then drops
  the lock), so nothing may depend on it.

Pure Python (no pyspark): the reader in :mod:`spark_stream_sched.spark.source` translates
Spark's calls and read limits into these.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.inputs import split
from spark_stream_sched.inputs.admission import admit
from spark_stream_sched.inputs.consumed import ReadToEnd, moved_from
from spark_stream_sched.inputs.cursors import EventTimeCache, warn_ignored_files
from spark_stream_sched.inputs.listing import empty_glob_error, is_glob, list_files
from spark_stream_sched.inputs.manifest import FileManifest
from spark_stream_sched.inputs.offsets import Offset, version_id
from spark_stream_sched.inputs.plan import (
    SourcePlan,
    empty_input_message,
    files_after,
    files_between,
    mark_idle,
)
from spark_stream_sched.inputs.streams import Cursor
from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.state import batch_metrics, owner
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.runtime.state.sweep import sweep_temporaries
from spark_stream_sched.runtime.state.usage import location_figures, rss_figure

log = logging.getLogger(__name__)

#: State versions kept before the committed one (for replays and inspection).
KEEP_OLDER_VERSIONS = 2


class SourceDriver:
    """The driver's state of one query (see the module docstring); not picklable."""

    def __init__(self, plan: SourcePlan, clock: Callable[[], float] = time.monotonic) -> None:
        self.plan = plan
        self.clock = clock  # wall clock of idle inputs (replaced by tests)
        self.lock = LocationLock(plan.config.state_location)
        #: per input, how many manifest files Trigger.AvailableNow froze (None: not frozen)
        self.frozen: list[int] | None = None
        self._manifests: list[FileManifest] | None = None
        self._ends: list[ReadToEnd] = []  # per input: files its cursors read to the end
        self._quiet_since: dict[int, float] = {}  # input -> clock when its last row was seen
        self._empty_reported = False  # inputs without files are reported once per process
        self._ts_cache = EventTimeCache()  # timestamps peeked by admission, kept across batches
        self._token: str | None = None  # the location's owner token, once checked
        self._claimed: str | None = None  # the token this process drew at initialOffset
        #: the newest offset Spark is known to stand at (pyspark < 4.2; see spark_reached)
        self._spark_at: Offset | None = None

    @property
    def manifests(self) -> list[FileManifest]:
        """The input manifests (the first use takes the state location's lock and sweeps it)."""
        if self._manifests is None:
            self.lock.acquire()
            c = self.plan.config
            sweep_temporaries(c.state_location)
            split.prune(c.state_location, None)
            self._manifests = [FileManifest(c.state_location, j, path)
                               for j, path in enumerate(c.inputs)]
            self._ends = [ReadToEnd(c.state_location, s.input_id, s.fmt)
                          for s in self.plan.streams]
        return self._manifests

    @property
    def ends(self) -> list[ReadToEnd]:
        """Per input, the files its cursors read to the end (loaded with the manifests)."""
        self.manifests  # noqa: B018 - the lock first
        return self._ends

    def fresh_offset(self) -> Offset:
        """``initialOffset``: the start of a fresh checkpoint, carrying a new owner token.

        Spark asks for it (twice, measured on pyspark 4.3) only when the checkpoint holds no
        offset of this source; a restart is handed its logged offsets instead. The token is
        drawn once per driver process.
        """
        self.manifests  # noqa: B018 - the lock first
        if self._token is None:
            self._token = self._claimed = owner.claim_fresh(self.plan.config.state_location)
        return Offset.initial(self.plan.config.n_inputs, self._token)

    def check_owner(self, offset: Offset, planned: bool = False) -> None:
        """Refuse an offset Spark handed back unless it carries the location's owner token.

        ``planned``: Spark logged it as the end of a batch it now runs (``partitions()``),
        which confirms a fresh owner record (:func:`~spark_stream_sched.runtime.state.owner.\
check_token`).
        """
        self.manifests  # noqa: B018 - the lock first
        self._token = owner.check_token(self.plan.config.state_location, offset.owner, planned,
                                        self._claimed)

    def sync(self, late_files: str, admit_new: bool) -> None:
        """Append newly listed files to the manifests; handle late files by ``late_files``."""
        for manifest in self.manifests:
            manifest.sync(list_files(manifest.input_path), late_files, admit_new)

    def freeze(self) -> None:
        """``Trigger.AvailableNow``: admit the files present now, then no more.

        Late files are skipped now with ``lateFiles=skip``; with ``fail`` the next
        :meth:`next_offset` reports them, so a batch Spark replays first still completes.
        """
        c = self.plan.config
        self.sync("skip" if c.late_files == "skip" else "defer", admit_new=True)
        self.frozen = [len(m.admitted) for m in self.manifests]
        log.info("Trigger.AvailableNow: %s files frozen", self.frozen)
        if c.end_of_input == "never":
            log.warning("Trigger.AvailableNow with endOfInput=never: the query stops at the "
                        "files present now but the last windows stay open, waiting for rows "
                        "of a later run; set option endOfInput=availableNow to flush the last "
                        "windows at the end of this run")
        self.report_empty()

    @property
    def finishing(self) -> bool:
        """Whether an input is finished once its listed rows are consumed (``endOfInput``)."""
        c = self.plan.config
        return c.end_of_input == "exhausted" or (
            c.end_of_input == "availableNow" and self.frozen is not None)

    def report_empty(self) -> None:
        """Warn once per driver process about inputs that hold no file.

        Raises
        ------
        InputError
            A glob input that matches no file where ``endOfInput`` finishes it now: files added
            later would be ignored for the life of the query (:func:`~.listing.\
empty_glob_error`).
        """
        if self._empty_reported:
            return
        c = self.plan.config
        for j, manifest in enumerate(self.manifests):
            path = manifest.input_path
            if manifest.admitted:
                continue
            if self.finishing and is_glob(path) and not list_files(path):
                raise empty_glob_error(path, f"endOfInput={c.end_of_input} would count input "
                                             f"{j} as finished and empty at once (files added "
                                             f"later are ignored)")
            log.warning("%s", empty_input_message(j, path, c.end_of_input,
                                                  self.frozen is not None))
        self._empty_reported = True

    def files(self, input_id: int) -> list[str]:
        """The manifest's files of one input (up to the frozen length under AvailableNow)."""
        admitted = self.manifests[input_id].admitted
        return admitted if self.frozen is None else admitted[: self.frozen[input_id]]

    # -- one batch ---------------------------------------------------------------------------

    def next_offset(self, offset: Offset, budget: int | None) -> Offset:
        """The offset after the next batch: at most ``budget`` rows (None: all listed)."""
        c = self.plan.config
        self.check_owner(offset)
        if offset != Offset.initial(c.n_inputs):  # the batch that ended there has run
            split.prune(c.state_location, version_id(offset))
        for j, cursor in enumerate(offset.cursors):
            self.settle(j, cursor)
        # Durable before the offset that refers to the files is returned (and logged by Spark).
        self.sync(c.late_files, admit_new=self.frozen is None)
        self.report_empty()
        files = [self.files(j) for j in range(c.n_inputs)]
        cursors = self._admit(offset, files, budget)
        if c.idle_timeout_ms is not None:
            cursors = mark_idle(offset.cursors, cursors, self._quiet_since, self.clock(),
                                c.idle_timeout_ms)
        for j, stream in enumerate(self.plan.streams):
            warn_ignored_files(stream, files[j], cursors[j])
        for ends, start, end in zip(self.ends, offset.cursors, cursors, strict=True):
            ends.remember((start, end))  # durable before Spark logs the offset
        return Offset(cursors, self._token)

    def settle(self, input_id: int, cursor: Cursor) -> None:
        """Check the admitted files of an input against the start of the batch to plan.

        The file ``cursor`` is in has been read from by a batch Spark logged: it must not have
        changed (:meth:`~.manifest.FileManifest.check_unchanged`). The files after it are in no
        logged offset yet, so one completed, replaced or removed since it was admitted is taken
        as it is now (:meth:`~.manifest.FileManifest.refresh`): a fix of the file the query
        stopped on lets it go on. A cursor past a deleted file it read to the end
        (:mod:`~spark_stream_sched.inputs.consumed`) checks only the files after it.
        """
        if cursor.finished or not self.check_cursor(input_id, cursor):
            return
        manifest = self.manifests[input_id]
        cursor, names = self.ends[input_id].settle(cursor, self.files(input_id))
        if cursor.file is not None:
            manifest.check_unchanged([cursor.file])
        dropped = manifest.refresh(files_after(names, cursor.file))
        if self.frozen is not None:
            self.frozen[input_id] -= dropped

    def check_cursor(self, input_id: int, cursor: Cursor) -> bool:
        """Refuse a cursor in a file the input's manifest never admitted; False: nothing to check.

        The file a cursor is in stays in the manifest (compaction folds only the files before
        it), so such a cursor comes from another query's or another input's offset (inputs
        reordered, an edited offset). False when the manifest is new: a location from before
        manifests adopts the current listing (:meth:`sync`).

        Raises
        ------
        StateError
            Naming the input, the file, the input it belongs to if any, and what to do.
        """
        manifest = self.manifests[input_id]
        if manifest.is_new:
            return False
        if cursor.file is None or manifest.holds(cursor.file):
            return True
        owners = [j for j, m in enumerate(self.manifests) if m.holds(cursor.file)]
        whose = (f"a file of input {owners[0]} ({self.manifests[owners[0]].input_path})"
                 if owners else "a file no input of this query admitted")
        raise StateError(
            f"the offset's cursor of input {input_id} ({manifest.input_path}) is in "
            f"{cursor.file!r}, {whose}: the offset does not belong to these inputs (option "
            f"inputs reordered or changed, or the checkpoint's offset edited) — restore option "
            f"inputs and the checkpoint, or start the query with a new checkpointLocation and "
            f"stateLocation")

    def _admit(self, offset: Offset, files: list[list[str]],
               budget: int | None) -> tuple[Cursor, ...]:
        """Each input's cursor after the next batch, admitted past a deleted file it read.

        A cursor past its file (:mod:`~spark_stream_sched.inputs.consumed`) is admitted from
        the files after it, and stays in that file when it gets no row.
        """
        settled = [ends.settle(cursor, names)
                   for ends, cursor, names in zip(self.ends, offset.cursors, files, strict=True)]
        cursors = admit(self.plan, [cursor for cursor, _ in settled],
                        [names for _, names in settled], budget, self.finishing, self._ts_cache)
        return tuple(moved_from(end, start)
                     for end, start in zip(cursors, offset.cursors, strict=True))

    def spark_reached(self, offset: Offset) -> None:
        """Spark logged ``offset`` as the end of a batch (``partitions``), or stands there.

        Without admission control (pyspark 4.0, 4.1) ``latestOffset()`` carries no start, so
        the driver follows Spark's position: on a restart Spark names the newest offset of its
        log first (``AcceptsLatestSeenOffset``, which pyspark turns into ``partitions(L, L)``),
        then every batch it runs ends at an offset this driver reported or Spark replays.
        """
        self._spark_at = offset

    def next_offset_unprompted(self, budget: int | None) -> Offset:
        """``latestOffset()`` without a start or a limit (pyspark 4.0 and 4.1).

        The next batch starts where Spark stands (:meth:`spark_reached`; the initial offset on
        a fresh checkpoint, whose first call comes before ``initialOffset``) and admits at most
        ``budget`` rows, as :meth:`next_offset` does. Spark runs ``Trigger.AvailableNow`` for
        such a source as one micro-batch up to the first offset it reports, so with
        ``endOfInput=availableNow`` the first call of a driver process freezes the inputs
        (:meth:`freeze`) and admits every row present, whatever the budget; docs/deploy.md,
        "Spark versions".
        """
        if self.frozen is None and self.plan.config.end_of_input == "availableNow":
            self.freeze()
            if budget is not None and self.plan.max_records_explicit:
                log.warning("this pyspark runs Trigger.AvailableNow of a Python source as one "
                            "micro-batch: maxRecordsPerTrigger=%d does not apply to it (it "
                            "caps the batches of processing-time triggers)", budget)
            budget = None
        start = self._spark_at if self._spark_at is not None else self.fresh_offset()
        end = self.next_offset(start, budget)
        self._spark_at = end
        return end

    def batch_files(self, first: Offset, last: Offset) -> tuple[tuple[tuple[str, ...], ...], int]:
        """Each input's files between the offsets, and the late files skipped so far."""
        self.check_owner(last, planned=True)
        for j, (manifest, cursor) in enumerate(zip(self.manifests, last.cursors, strict=True)):
            if cursor.file is not None and manifest.is_new:  # state from before manifests
                manifest.sync(list_files(manifest.input_path), "defer")
            self.check_cursor(j, first.cursors[j])
            self.check_cursor(j, cursor)
        files = tuple(self._between(j, first.cursors[j], last.cursors[j])
                      for j in range(len(self.manifests)))
        for manifest, batch_files in zip(self.manifests, files, strict=True):
            manifest.check_unchanged(batch_files)
        return files, sum(m.skipped_count for m in self.manifests)

    def _between(self, input_id: int, first: Cursor, last: Cursor) -> tuple[str, ...]:
        """One input's files of the batch from ``first`` to ``last`` (past a deleted file read).

        Raises
        ------
        InputError
            ``first`` is in a file the manifest does not hold.
        """
        start, names = self.ends[input_id].settle(first, self.manifests[input_id].admitted)
        if start.file is not None and start.file not in names:
            raise InputError(f"input {input_id}: file {start.file!r} of the checkpointed cursor "
                             f"is no longer listed; files of an input must not be removed or "
                             f"renamed while the query runs")
        return files_between(names, start.file, last.file)

    def committed(self, end: Offset) -> None:
        """Housekeeping after Spark committed the offset ``end`` (module docstring)."""
        c = self.plan.config
        self.check_owner(end)
        location, version = c.state_location, version_id(end)
        for manifest, cursor in zip(self.manifests, end.cursors, strict=True):
            if cursor.file is not None:  # no batch starts before the file the cursor is in
                manifest.compact(cursor.file)
        deleted = FileStateStore(location, cache=None).prune(version, KEEP_OLDER_VERSIONS)
        split.prune(location, version)
        assignments.prune(location, version, c.keep_metrics)
        log.debug("commit %s: pruned %d old state versions", version, deleted)
        try:
            usage = {**location_figures(location), **rss_figure("driver_rss_bytes")}
            merged = batch_metrics.merge_batch(location, version, driver=usage)
            batch_metrics.prune(location, version, c.keep_metrics)
        except (OSError, ValueError) as exc:
            log.warning("cannot merge the metrics of version %s under %s: %s; the query goes "
                        "on, the report lacks this batch", version,
                        batch_metrics.metrics_dir(location), exc)
            return
        if merged is not None:
            log.info("ordered-agg batch %s: %s", merged["batch_id"],
                     json.dumps(merged, sort_keys=True))

    def close(self) -> None:
        """Drop the rows of batches this process planned; release the lock."""
        if self._manifests is not None:
            split.prune(self.plan.config.state_location, None)
        self.lock.release()

