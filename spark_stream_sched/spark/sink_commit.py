"""The ``ordered-agg`` sink's driver side, without Spark: options, on-disk layout, commits.

:class:`SinkCommitter` turns the rows that executors staged for one batch id into result
Parquet files and a new state version, idempotently (see :mod:`spark_stream_sched.spark.sink`
for the whole protocol). Nothing here imports pyspark, so it is tested without a JVM.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime.query import OrderedAggregation, QuerySpec, spec_from_options
from spark_stream_sched.runtime.query.names import normalise_options, one_name, query_required
from spark_stream_sched.runtime.query.recorded import check_recorded, record_spec
from spark_stream_sched.runtime.query.spec import SpecView
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.commit_log import (
    FINAL,
    OWNER_FILE,
    batch_name,
    claim,
    commit_path,
    owner_record,
    read_marker,
    read_markers,
    read_state,
    state_file,
    write_marker,
    write_state,
)
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps
from spark_stream_sched.spark.options import int_option
from spark_stream_sched.testing.faults import crash_point

logger = logging.getLogger(__name__)

#: Canonical sink option names; Spark passes them lower-cased.
SINK_OPTION_NAMES: tuple[str, ...] = (
    "path", "inputs", "inputColumn", "timestampColumn", "keyColumns", "window", "slide",
    "aggregates", "outOfOrder", "stateLocation", "checkpointLocation", "sequenceColumn",
    "endOfInputColumn", "keepVersions", "queryName", "where", "operators",
)
SINK_REQUIRED = ("path", "inputs", "window", "aggregates")
#: Version of the on-disk layout (commit markers and state files).
SINK_FORMAT_VERSION = 1


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkConfig(SpecView):
    """The validated options of one ``ordered-agg`` sink (picklable, immutable).

    ``spec`` is what the query computes (the same :class:`QuerySpec` the source, job configs
    and the CLI build); the other fields wire Spark's rows to it and say where results go.
    """

    spec: QuerySpec
    path: str
    input_column: str
    state_location: str
    sequence_column: str | None
    end_column: str | None
    keep_versions: int
    checkpoint_location: str | None = None

    def wiring(self) -> dict[str, str | None]:
        """Options besides the spec that are fixed for a stateLocation (named as written)."""
        return {"inputColumn": self.input_column, "sequenceColumn": self.sequence_column,
                "endOfInputColumn": self.end_column}

    def fingerprint(self) -> str:
        """The query's fingerprint (:meth:`QuerySpec.fingerprint`; wiring is recorded apart)."""
        return self.spec.fingerprint()


def _state_location(opts: Mapping[str, str]) -> str:
    if opts.get("stateLocation", "").strip():
        return opts["stateLocation"].strip()
    if opts.get("checkpointLocation", "").strip():
        return str(Path(opts["checkpointLocation"].strip()) / "ordered-agg-sink")
    raise ConfigError("the ordered-agg sink needs option stateLocation or a checkpointLocation "
                      "(.option('checkpointLocation', ...)) to keep its state")


def parse_sink_options(options: Mapping[str, str]) -> SinkConfig:
    """Parse and validate the sink options (keys in any case).

    Raises
    ------
    ConfigError
        Unknown option (with a suggestion), missing required option or malformed value.

    Notes
    -----
    Called on the driver. Column checks against the stream's schema happen in
    :func:`make_stream_writer`.
    """
    opts = normalise_options(options, SINK_OPTION_NAMES, query_required(SINK_REQUIRED, options),
                             "ordered-agg sink")
    seq = opts.get("sequenceColumn", "").strip()
    end = opts.get("endOfInputColumn", "").strip()
    return SinkConfig(
        spec=spec_from_options(opts, int_option("inputs", opts["inputs"], 1)),
        path=opts["path"].strip(),
        input_column=one_name("inputColumn", opts.get("inputColumn", "input")),
        state_location=_state_location(opts),
        sequence_column=one_name("sequenceColumn", seq) if seq else None,
        end_column=one_name("endOfInputColumn", end) if end else None,
        keep_versions=int_option("keepVersions", opts.get("keepVersions", "10"), 1),
        checkpoint_location=opts.get("checkpointLocation", "").strip() or None,
    )


def check_schema(config: SinkConfig, schema: pa.Schema) -> None:
    """Check the stream's columns against the options; ConfigError naming what is wrong.

    Notes
    -----
    Called on the driver when the query starts, so a bad column fails at ``start()``.
    """
    def field(name: str, option: str) -> pa.Field:
        if name not in schema.names:
            raise ConfigError(f"option {option}={name!r}: no such column in the stream; "
                              f"columns are {schema.names}")
        return schema.field(name)

    if not pa.types.is_integer(field(config.input_column, "inputColumn").type):
        raise ConfigError(f"option inputColumn={config.input_column!r}: the input id must be an "
                          f"integer column, got {schema.field(config.input_column).type}")
    if config.end_column is not None and not pa.types.is_boolean(
            field(config.end_column, "endOfInputColumn").type):
        raise ConfigError(f"option endOfInputColumn={config.end_column!r} must be a boolean "
                          f"column")
    if config.sequence_column is not None:
        field(config.sequence_column, "sequenceColumn")
    # Building the operator checks the timestamp, key and aggregate columns.
    _new_query(config, runtime_schema(config, schema))


def runtime_schema(config: SinkConfig, schema: pa.Schema) -> pa.Schema:
    """Return the schema of the rows given to the runtime (no input-id/end/sequence columns)."""
    drop = {config.input_column, config.end_column, config.sequence_column}
    return pa.schema([f for f in schema if f.name not in drop])


def _new_query(config: SinkConfig, schema: pa.Schema) -> OrderedAggregation:
    return config.spec.build(schema)


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
    point ``sink.*`` of :mod:`spark_stream_sched.testing.faults` lies between two steps)::

        check owner ──> marker N exists? ── yes ──> replay: write nothing
             │                 │ no
             │                 v
             │        previous marker is N-1 (or none and N == 0)? ── no ──> StateError
             │                 │ yes
             │                 v
             │        output part-batch-N ──> state batch-N ──> marker batch-N (commit point)
             │           [output_written]      [state_written]    [marker_written]
             v
        (fresh location: claim it first [claimed]; the output path must hold no results)

    A crash before the marker leaves at most files that the retried commit rewrites with the
    same names and bytes (it starts again from state N-1); after the marker the batch is a
    replay. Batch 0 follows the same steps: once the location is claimed, part files in the
    output path are this query's own.
    """

    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.location = config.state_location

    def _owner(self) -> dict[str, Any]:
        return owner_record(self.config.checkpoint_location, self.config.path,
                            self.config.fingerprint())

    def claim(self) -> None:
        """Claim a fresh state location for this query, or check that it owns it.

        Notes
        -----
        Called on the driver when the query starts (:func:`make_stream_writer`) and before each
        commit, so a second query on the same ``stateLocation`` fails at ``start()``. A changed
        definition fails first, naming the changed option (``runtime/query/recorded.py``).
        """
        check_recorded(self.location, self.config.spec, self.config.wiring())
        if claim(self.location, self._owner(), self._has_results()):
            crash_point("sink.claimed", batch=0)
        record_spec(self.location, self.config.spec, self.config.wiring())

    def _has_results(self) -> bool:
        out = Path(self.config.path)
        return out.is_dir() and any(out.glob("part-*.parquet"))

    def _previous(self, batch_id: int) -> dict[str, Any] | None:
        """The marker of batch ``batch_id - 1``; StateError when the log has a gap."""
        records = [r for r in read_commits(self.config) if r["batch_id"] != FINAL]
        before = [r for r in records if r["batch_id"] < batch_id]
        latest = before[-1]["batch_id"] if before else None
        expected = batch_id - 1 if batch_id > 0 else None
        if latest != expected or any(r["batch_id"] > batch_id for r in records):
            missing = 0 if latest is None else latest + 1
            have = "no batch" if latest is None else f"batches up to {latest}"
            raise StateError(
                f"ordered-agg sink: Spark is committing batch {batch_id} but the sink's commit "
                f"log in {self.location} has {have}: the commit marker of batch {missing} "
                f"({commit_path(self.location, batch_name(missing))}) is missing, so batch "
                f"{batch_id} cannot be applied without losing or repeating rows. Restore the "
                f"marker, or start the query with a new checkpointLocation, stateLocation and "
                f"output path")
        return before[-1] if before else None

    def _load(self, record: dict[str, Any] | None) -> OrderedAggregation | None:
        if record is None or record["state"] is None:
            return None
        if record.get("fingerprint") != self.config.fingerprint():
            raise StateError(f"ordered-agg sink state in {self.location} was "
                             f"written with other options (window, keys, aggregates, inputs...); "
                             f"use a new checkpoint/stateLocation for a changed query")
        data = read_state(self.location, record)
        try:
            return OrderedAggregation.restore(data)
        except StateError as exc:
            raise StateError(f"state file {state_file(self.location, record)} "
                             f"cannot be restored ({exc}); use a new checkpointLocation, "
                             f"stateLocation and output path") from exc

    def commit_batch(self, batch_id: int, staged_files: Sequence[str]) -> dict[str, Any]:
        """Commit one micro-batch from its staged Arrow files; return its commit record.

        A batch id that is already committed *by this query* is a replay: nothing is written and
        the existing record is returned (with ``"replayed": True``).

        Raises
        ------
        StateError
            The state location belongs to another query, the previous batch's marker is
            missing, the sink was finished, or state is missing or corrupt.
        """
        with LocationLock(self.location, "ordered-agg sink").hold():
            self.claim()
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
            table = _read_staged(staged_files)
            query = self._load(previous)
            finished = set(previous["finished"]) if previous else set()
            if query is None and table is not None:
                query = _new_query(self.config, runtime_schema(self.config, table.schema))
            rows_in, out = 0, None
            if query is not None and table is not None:
                rows_in, out = self._apply(query, table, finished, batch_id)
            return self._record(batch_id, batch_name(batch_id), query, out, rows_in, finished,
                                order=batch_id)

    def finish(self) -> dict[str, Any] | None:
        """Finish every input and write the windows still open; idempotent.

        Returns the ``final`` commit record, or None when nothing was ever committed.
        """
        with LocationLock(self.location, "ordered-agg sink").hold():
            if not (Path(self.location) / OWNER_FILE).exists() and not read_commits(self.config):
                return None
            self.claim()
            marker = commit_path(self.location, FINAL)
            if marker.exists():
                return {**read_marker(marker), "replayed": True}
            records = [r for r in read_commits(self.config) if r["batch_id"] != FINAL]
            if not records:
                return None
            previous = records[-1]
            query = self._load(previous)
            finished = set(previous["finished"])
            out = None
            if query is not None:
                for i in range(self.config.n_inputs):
                    if i not in finished:
                        query.finish(i)
                finished = set(range(self.config.n_inputs))
                out = query.poll()
            return self._record(FINAL, FINAL, query, out, 0, finished,
                                order=int(previous["batch_id"]) + 1)

    # -- steps ---------------------------------------------------------------------------------

    def _apply(self, query: OrderedAggregation, table: pa.Table, finished: set[int],
               batch_id: int) -> tuple[int, pa.Table]:
        cfg = self.config
        ids = _input_ids(table, cfg, batch_id)
        ends = np.zeros(len(ids), dtype=bool)
        if cfg.end_column is not None:
            ends = table.column(cfg.end_column).fill_null(False).to_numpy(zero_copy_only=False)
        rows_in = 0
        newly_finished = []
        for i in range(cfg.n_inputs):
            mine = ids == i
            data_rows = mine & ~ends
            if data_rows.any():
                if i in finished:
                    raise InputError(f"ordered-agg sink: batch {batch_id} has rows for input {i}, "
                                     f"which was declared finished by an end-of-input row")
                part = table.filter(pa.array(data_rows))
                query.push(i, _order_within_batch(part, cfg))
                rows_in += int(data_rows.sum())
            if (mine & ends).any() and i not in finished:
                newly_finished.append(i)
        for i in newly_finished:
            query.finish(i)
            finished.add(i)
        return rows_in, query.poll()

    def _record(self, batch_id: int | str, name: str, query: OrderedAggregation | None,
                out: pa.Table | None, rows_in: int, finished: set[int],
                order: int) -> dict[str, Any]:
        step = {"batch": batch_id}
        output = None
        if out is not None and out.num_rows and query is not None:
            output = f"part-{name}.parquet"
            atomic_write(str(Path(self.config.path) / output),
                         _parquet_bytes(_window_types(out, query)))
        crash_point("sink.output_written", **step)
        state_name, digest = None, None
        if query is not None:
            state_name, digest = write_state(self.location, name, query.snapshot())
        crash_point("sink.state_written", **step)
        record = {
            "format_version": SINK_FORMAT_VERSION, "batch_id": batch_id, "order": order,
            "rows_in": rows_in, "rows_out": 0 if out is None else out.num_rows,
            "output": output, "state": state_name, "state_sha256": digest,
            "finished": sorted(finished), "fingerprint": self.config.fingerprint(),
            "ready_bound": None if query is None else query.merge.ready_bound,
            "dropped": None if query is None else query.merge.dropped,
        }
        write_marker(self.location, name, record)
        crash_point("sink.marker_written", **step)
        if isinstance(batch_id, int):
            self._drop_staging(batch_id)
        self._prune()
        logger.info("ordered-agg sink: committed %s: %d rows in, %d rows out", name, rows_in,
                    record["rows_out"])
        return record

    def _drop_staging(self, batch_id: int) -> None:
        """Remove the staging of this batch and of any older (aborted) batch."""
        root = Path(self.location) / "staging"
        if not root.is_dir():
            return
        for directory in root.iterdir():
            if directory.name <= batch_name(batch_id):
                shutil.rmtree(directory, ignore_errors=True)

    def _prune(self) -> None:
        """Keep the state files of the last ``keep_versions`` commits."""
        keep = {r["state"] for r in read_commits(self.config)[-self.config.keep_versions:]}
        directory = Path(self.location) / "state"
        for path in directory.glob("*.state"):
            if path.name not in keep:
                path.unlink(missing_ok=True)


def _window_types(out: pa.Table, query: OrderedAggregation) -> pa.Table:
    """Give ``window_start``/``window_end`` the input's timestamp type (UTC micros) if it has one.

    Integer event times stay int64 milliseconds, as in the ``ordered-agg`` source.
    """
    assert query.merge.schema is not None
    ts_type = query.merge.schema.field(query.merge.ts_column).type
    return bounds_as_timestamps(out) if pa.types.is_timestamp(ts_type) else out


def _read_staged(files: Sequence[str]) -> pa.Table | None:
    tables = []
    for name in files:
        try:
            with pa.memory_map(name) as source:
                tables.append(pa.ipc.open_file(source).read_all())
        except (OSError, pa.ArrowInvalid) as exc:
            raise StateError(f"staged file {name} cannot be read ({exc}); the batch cannot be "
                             f"committed; restart the query from its checkpoint") from exc
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def _input_ids(table: pa.Table, cfg: SinkConfig, batch_id: int) -> np.ndarray:
    column = table.column(cfg.input_column)
    if column.null_count:
        raise InputError(f"ordered-agg sink: batch {batch_id}: column {cfg.input_column!r} "
                         f"(the input id) is null in {column.null_count} rows")
    ids = np.asarray(column.to_numpy(), dtype=np.int64)
    bad = (ids < 0) | (ids >= cfg.n_inputs)
    if bad.any():
        raise InputError(f"ordered-agg sink: batch {batch_id}: input id {int(ids[bad][0])} in "
                         f"column {cfg.input_column!r} is outside 0..{cfg.n_inputs - 1} "
                         f"(option inputs={cfg.n_inputs})")
    return ids


def _sortable(kind: pa.DataType) -> bool:
    return not (pa.types.is_nested(kind) or pa.types.is_dictionary(kind))


def _order_within_batch(part: pa.Table, cfg: SinkConfig) -> pa.Table:
    """Order one input's rows of one batch by ts, then by sequence column or row values."""
    part = part.drop_columns([c for c in (cfg.input_column, cfg.end_column) if c])
    ties = ([cfg.sequence_column] if cfg.sequence_column else
            [f.name for f in part.schema if f.name != cfg.timestamp_column and _sortable(f.type)])
    keys = [(c, "ascending", "at_start") for c in [cfg.timestamp_column, *ties]]
    ordered = part.take(pc.sort_indices(part, sort_keys=keys))
    return ordered.drop_columns([cfg.sequence_column]) if cfg.sequence_column else ordered


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
    return SinkCommitter(parse_sink_options(options)).finish()
