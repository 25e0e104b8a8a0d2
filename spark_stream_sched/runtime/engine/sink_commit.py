"""The ``ordered-agg`` sink's commit protocol on the driver, without Spark (no pyspark).

:class:`SinkCommitter` turns what the write tasks of one batch id staged and reported into a
result Parquet file, a new state version and a commit marker, exactly once
(:mod:`spark_stream_sched.spark.sink` has the whole picture, ``docs/dev/sink-internals.md``
the crash points).
The group work is the engine's (:mod:`~.sink_commit_step`); this module keeps the books.

Layout under ``stateLocation`` (default ``<checkpointLocation>/ordered-agg-sink``)::

    _sink.json                      owner: checkpoint, Spark query id, output path, fingerprint
    _query.json                     the query definition (a changed one is refused)
    _lock                           flock'ed while a commit or finish runs
    commits/batch-<id>.json         commit marker of batch <id> (written last, atomically);
                                    the newest ``keepMetrics`` (>= ``keepVersions``) are kept
    commits/final.json              marker of finish_sink(): every input finished
    versions/batch-<id>/            the group state after batch <id>
                                    (:mod:`~spark_stream_sched.runtime.state.files`, the
                                    source's layout; pruned to ``keepVersions``)
    staging/batch-<id>/part-*.arrow rows (and results) the write tasks of batch <id> staged;
                                    deleted when batch <id> commits (or aborts)

and under the output ``path``::

    _ordered-agg-sink.json          owner: checkpoint, Spark query id, stateLocation
    part-batch-<id>.parquet         the windows batch <id> closed; part-final.parquet: the rest

Every commit first sweeps the temporary files of interrupted writes from the location, and from
the output directory once the owner records are checked
(:mod:`~spark_stream_sched.runtime.state.sweep`); docs/state_store.md ("Retention") has the rule
of every file.
"""

from __future__ import annotations

import base64
import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.errors import StateError
from spark_stream_sched.faults import crash_point
from spark_stream_sched.runtime.engine.sink_batch import Previous, TaskWork
from spark_stream_sched.runtime.engine.sink_commit_step import (
    Applied,
    Staged,
    commit_step,
    finish_step,
)
from spark_stream_sched.runtime.engine.sink_config import SinkConfig, check_group_function
from spark_stream_sched.runtime.packets import TS_MAX
from spark_stream_sched.runtime.query.recorded import check_recorded, record_spec
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.commit_log import (
    FINAL,
    OWNER_FILE,
    batch_name,
    claim,
    commit_path,
    marker_ids,
    prune_markers,
    read_marker,
    read_markers,
    write_marker,
)
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.runtime.state.owner import sink_owner
from spark_stream_sched.runtime.state.sweep import sweep_temporaries
from spark_stream_sched.runtime.state.usage import location_figures, rss_figure
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps

logger = logging.getLogger(__name__)

#: The driver's wall clock (seconds), read once per commit: it decides idle inputs.
wall_clock = time.time
#: Version of the on-disk layout (commit markers and state files).
SINK_FORMAT_VERSION = 3


# -- on-disk layout (runtime/state/commit_log.py has the commit log, owner and state files) ---


def staging_dir(config: SinkConfig, batch_id: int) -> Path:
    """Directory where the tasks of ``batch_id`` stage their rows."""
    return Path(config.state_location) / "staging" / batch_name(batch_id)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue())


def read_commits(config: SinkConfig) -> list[dict[str, Any]]:
    """Every commit marker of the sink, in batch order (the ``final`` marker last)."""
    return read_markers(config.state_location)


# -- the committer (driver side, no Spark needed) ----------------------------------------------


class SinkCommitter:
    """Applies staged micro-batches to the versioned sink state; exactly once per batch id.

    Parameters
    ----------
    config:
        The parsed sink options.

    Notes
    -----
    Called on the driver (from :meth:`OrderedAggStreamWriter.commit` or :func:`finish_sink`),
    one batch at a time, in batch-id order, as Spark does. A fresh instance per call is fine: all
    state is read from ``stateLocation``. The commit protocol, as a state machine (every crash
    point ``sink.*`` of :mod:`spark_stream_sched.faults` lies between two steps)::

        check owner ──> marker N exists? ── yes ──> replay: write nothing
             │                 │ no
             │                 v
             │        previous marker is N-1 (or none and N == 0)? ── no ──> StateError
             │                 │ yes
             │                 v
             │        state batch-N ──> output part-batch-N ──> marker batch-N (commit point)
             │         [state_written]     [output_written]      [marker_written]
             v
        (fresh location: claim it and the output path first [claimed]; the path must hold
         no results, and another query's path is refused)

    A crash before the marker leaves at most files that the retried commit rewrites under the
    same names (it starts again from state N-1, and its manifest replaces the first one); after
    the marker the batch is a replay. Batch 0 follows the same steps: once the location is
    claimed, part files in the output path are this query's own.
    """

    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.location = config.state_location
        self._usage: dict[str, int] = {}  # the location's files and bytes at the commit's start

    def _owner(self) -> dict[str, Any]:
        return sink_owner(self.config.checkpoint_location, self.config.path,
                          self.config.fingerprint())

    def claim(self) -> None:
        """Claim a fresh state location and output path for this query, or check it owns them.

        Notes
        -----
        Called on the driver when the query starts (:func:`make_stream_writer`) and before each
        commit, so a second query on the same ``stateLocation`` or ``path`` fails when Spark
        plans its first micro-batch, before it writes anything
        (:func:`~spark_stream_sched.runtime.state.commit_log.claim`). A changed definition fails
        first, naming the changed option (``runtime/query/recorded.py``).
        """
        check_recorded(self.location, self.config.spec, self.config.wiring())
        check_group_function(self.config)
        if claim(self.location, self._owner()):
            crash_point("sink.claimed", batch=0)
        record_spec(self.location, self.config.spec, self.config.wiring())

    def _previous(self, batch_id: int) -> dict[str, Any] | None:
        """The marker of batch ``batch_id - 1``; StateError when the log has a gap."""
        ids = marker_ids(self.location)
        before = [i for i in ids if i < batch_id]
        latest = before[-1] if before else None
        expected = batch_id - 1 if batch_id > 0 else None
        if latest != expected or any(i > batch_id for i in ids):
            missing = 0 if latest is None else latest + 1
            have = "no batch" if latest is None else f"batches up to {latest}"
            raise StateError(
                f"ordered-agg sink: Spark is committing batch {batch_id} but the sink's commit "
                f"log in {self.location} has {have}: the commit marker of batch {missing} "
                f"({commit_path(self.location, batch_name(missing))}) is missing, so batch "
                f"{batch_id} cannot be applied without losing or repeating rows. Restore the "
                f"marker, or start the query with a new checkpointLocation, stateLocation and "
                f"output path")
        return None if latest is None else read_marker(commit_path(self.location,
                                                                   batch_name(latest)))

    def _check_fingerprint(self, record: dict[str, Any] | None) -> None:
        if record is None:
            return
        check_format(record, self.location)
        if record.get("fingerprint") != self.config.fingerprint():
            raise StateError(f"ordered-agg sink state in {self.location} was "
                             f"written with other options (window, keys, aggregates, inputs...); "
                             f"use a new checkpoint/stateLocation for a changed query")

    def commit_batch(self, batch_id: int, staged_files: Sequence[str],
                     works: Sequence[TaskWork | None] | None = None) -> dict[str, Any]:
        """Commit one micro-batch from its staged files and the tasks' reports.

        Returns the batch's commit record.

        ``works[k]`` is what the task that staged ``staged_files[k]`` did on the executor
        (:func:`~spark_stream_sched.runtime.engine.sink_batch.run_task`); None (or no
        ``works``) leaves that file's groups to the driver. A batch id that is already
        committed *by this query* is a replay: nothing is written and the existing record is
        returned (with ``"replayed": True``).

        Raises
        ------
        StateError
            The state location belongs to another query, the previous batch's marker is
            missing, the sink was finished, or state is missing or corrupt.
        """
        started = time.process_time()
        with LocationLock(self.location, "ordered-agg sink").hold():
            sweep_temporaries(self.location)
            self._usage = location_figures(self.location)  # as the batch's tasks left it
            self.claim()
            sweep_temporaries(self.config.path, recursive=False)  # the path is ours now
            marker = commit_path(self.location, batch_name(batch_id))
            if marker.exists():
                logger.info("ordered-agg sink: batch %d is already committed; replay ignored",
                            batch_id)
                self._drop_staging(batch_id)
                return {**read_marker(marker), "replayed": True}
            if commit_path(self.location, FINAL).exists():
                raise StateError(f"ordered-agg sink: batch {batch_id} arrived after "
                                 f"finish_sink() closed every input; use a new "
                                 f"checkpoint/stateLocation")
            previous = self._previous(batch_id)
            self._check_fingerprint(previous)
            works = list(works) if works is not None else [None] * len(staged_files)
            staged = [Staged(f, w) for f, w in zip(staged_files, works, strict=True)]
            schema = staged_schema(staged_files)
            if schema is None:  # no row in this batch: the state stays as it was
                return self._record(batch_id, batch_name(batch_id), self._unchanged(previous),
                                    previous, order=batch_id, started=started,
                                    version=(previous or {}).get("version"))
            runtime = self.config.runtime_schema(schema)
            applied = commit_step(self.config, batch_id, batch_name(batch_id), previous,
                                  staged, runtime, wall_clock())
            applied.stats["ts_is_timestamp"] = pa.types.is_timestamp(
                schema.field(self.config.timestamp_column).type)
            applied.stats["schema"] = encode_schema(runtime)
            return self._record(batch_id, batch_name(batch_id), applied, previous, order=batch_id,
                                started=started)

    def _unchanged(self, previous: dict[str, Any] | None) -> Applied:
        """A batch without rows: the previous state, bound and flags carry over."""
        p = previous or {}
        n = self.config.n_inputs
        return Applied(None, list(p.get("input_max") or [None] * n), set(p.get("finished", [])),
                       p.get("ready_bound"), 0, int(p.get("dropped") or 0),
                       list(p.get("idle_next") or [False] * n),
                       list(p.get("last_rows_at") or [None] * n),
                       hold=Previous.of(previous, n).hold)

    def finish(self) -> dict[str, Any] | None:
        """Finish every input and write the windows still open; idempotent.

        Returns the ``final`` commit record, or None when nothing was ever committed.
        """
        with LocationLock(self.location, "ordered-agg sink").hold():
            if not ((Path(self.location) / OWNER_FILE).exists() or marker_ids(self.location)
                    or commit_path(self.location, FINAL).exists()):
                return None
            sweep_temporaries(self.location)
            self.claim()
            sweep_temporaries(self.config.path, recursive=False)  # the path is ours now
            marker = commit_path(self.location, FINAL)
            if marker.exists():
                return {**read_marker(marker), "replayed": True}
            ids = marker_ids(self.location)
            if not ids:
                return None
            previous = read_marker(commit_path(self.location, batch_name(ids[-1])))
            self._check_fingerprint(previous)
            out = None
            if previous.get("schema") is not None:
                out = finish_step(self.config, previous, FINAL, decode_schema(previous["schema"]))
            applied = Applied(out, list(previous["input_max"]), set(range(self.config.n_inputs)),
                              TS_MAX, 0, int(previous.get("dropped") or 0))
            return self._record(FINAL, FINAL, applied, previous,
                                order=int(previous["batch_id"]) + 1)

    # -- steps ---------------------------------------------------------------------------------

    def _record(self, batch_id: int | str, name: str, applied: Applied,
                previous: dict[str, Any] | None, order: int, started: float | None = None,
                version: str | None = "") -> dict[str, Any]:
        """Write the batch's output, then its marker (naming ``version``, default ``name``)."""
        version = name if version == "" else version
        step = {"batch": batch_id}
        # the version's group files and manifest were written by the steps, before the output
        crash_point("sink.state_written", **step)
        previous = previous or {}
        schema = applied.stats.pop("schema", previous.get("schema"))
        is_ts = applied.stats.pop("ts_is_timestamp", previous.get("ts_is_timestamp", False))
        out = applied.output
        output = None
        if out is not None and out.num_rows:
            output = f"part-{name}.parquet"
            atomic_write(str(Path(self.config.path) / output),
                         _parquet_bytes(bounds_as_timestamps(out) if is_ts else out))
        crash_point("sink.output_written", **step)
        record = {
            "format_version": SINK_FORMAT_VERSION, "batch_id": batch_id, "order": order,
            "rows_in": applied.rows_in, "rows_out": 0 if out is None else out.num_rows,
            "output": output, "version": version,
            "input_max": applied.input_max, "finished": sorted(applied.finished),
            "fingerprint": self.config.fingerprint(), "ready_bound": applied.bound,
            "dropped": applied.dropped, "release_hold": applied.hold,
            "idle_next": applied.idle_next,
            "last_rows_at": applied.last_rows_at, "schema": schema, "ts_is_timestamp": is_ts,
            **applied.stats,
        }
        if started is not None:  # the driver's CPU time for the whole commit, output included
            record["driver_cpu_s"] = round(time.process_time() - started, 6)
        record["committed_at"] = round(time.time(), 3)
        record.update(self._usage, **rss_figure("driver_rss_bytes"))
        write_marker(self.location, name, record)
        crash_point("sink.marker_written", **step)
        if isinstance(batch_id, int):
            self._drop_staging(batch_id)
        self._prune(name)
        logger.info("ordered-agg sink: committed %s: %d rows in, %d rows out", name,
                    applied.rows_in, record["rows_out"])
        return record

    def _drop_staging(self, batch_id: int) -> None:
        """Remove the staging of this batch and of any older (aborted) batch."""
        root = Path(self.location) / "staging"
        if not root.is_dir():
            return
        for directory in root.iterdir():
            if directory.name <= batch_name(batch_id):
                shutil.rmtree(directory, ignore_errors=True)

    def _prune(self, committed: str) -> None:
        """Prune state versions and commit markers after a commit.

        Versions older than the last ``keep_versions`` committed ones go (keeping the files a
        kept manifest names), and the markers of all but the newest ``max(keep_metrics,
        keep_versions)`` batches.
        """
        c = self.config
        newest = marker_ids(self.location)[-c.keep_versions:]
        markers = [read_marker(commit_path(self.location, batch_name(i))) for i in newest]
        kept = [str(r["version"]) for r in markers if r.get("version")]
        if kept:
            FileStateStore(self.location, cache=None).prune(min(kept), 0)
        prune_markers(self.location, max(c.keep_metrics, c.keep_versions))


def encode_schema(schema: pa.Schema) -> str:
    """An Arrow schema as base64 text (for the commit marker)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    """Inverse of :func:`encode_schema`."""
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def check_format(record: Mapping[str, Any], location: str) -> None:
    """Refuse a commit log written by an older release (another state layout)."""
    if record.get("format_version") != SINK_FORMAT_VERSION:
        raise StateError(f"the ordered-agg sink state in {location} was written by an older "
                         f"release (commit format {record.get('format_version')}, this release "
                         f"writes {SINK_FORMAT_VERSION} and keeps group state in versions/). "
                         f"Finish that query with the release that started it, or start with a "
                         f"new checkpointLocation, stateLocation and output path")


def staged_schema(files: Sequence[str]) -> pa.Schema | None:
    """Schema of the first staged file (None: no file)."""
    for path in files:
        try:
            with pa.memory_map(path) as source:
                return pa.ipc.open_file(source).schema
        except (OSError, pa.ArrowInvalid) as exc:
            raise StateError(f"staged file {path} cannot be read ({exc}); the batch cannot be "
                             f"committed; restart the query from its checkpoint") from exc
    return None
