"""The ``ordered-agg`` sink's driver side, without Spark: options, on-disk layout, commits.

:class:`SinkCommitter` turns the rows that executors staged for one batch id into result
Parquet files and a new state version, idempotently (see :mod:`spark_stream_sched.spark.sink`
for the whole protocol). Nothing here imports pyspark, so it is tested without a JVM.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime.aggregates import parse_aggregates, split_top_level
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.windows import WindowSpec
from spark_stream_sched.spark.options import (
    canonical_options,
    choice_option,
    int_option,
    parse_duration,
    split_names,
)

logger = logging.getLogger(__name__)

#: Canonical sink option names; Spark passes them lower-cased.
SINK_OPTION_NAMES: tuple[str, ...] = (
    "path", "inputs", "inputColumn", "timestampColumn", "keyColumns", "window", "slide",
    "aggregates", "outOfOrder", "stateLocation", "checkpointLocation", "sequenceColumn",
    "endOfInputColumn", "keepVersions", "queryName",
)
SINK_REQUIRED = ("path", "inputs", "window", "aggregates")
#: Version of the on-disk layout (commit markers and state files).
SINK_FORMAT_VERSION = 1
FINAL = "final"


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkConfig:
    """The validated options of one ``ordered-agg`` sink (picklable, immutable)."""

    path: str
    n_inputs: int
    input_column: str
    timestamp_column: str
    key_columns: tuple[str, ...]
    window_ms: int
    slide_ms: int
    aggregates: tuple[str, ...]
    out_of_order: str
    state_location: str
    sequence_column: str | None
    end_column: str | None
    keep_versions: int

    def fingerprint(self) -> str:
        """Hash of everything that must not change between restarts of one query."""
        fixed = {k: v for k, v in asdict(self).items() if k not in ("path", "keep_versions")}
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


def _one_name(option: str, text: str) -> str:
    names = split_names(option, text)
    if len(names) != 1:
        raise ConfigError(f"option {option}={text!r} must name exactly one column")
    return names[0]


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
    opts = canonical_options(options, SINK_OPTION_NAMES, SINK_REQUIRED, "sink")
    window_ms = parse_duration("window", opts["window"])
    slide_ms = parse_duration("slide", opts.get("slide", opts["window"]))
    if slide_ms > window_ms:
        raise ConfigError(f"option slide={opts['slide']!r} is longer than window="
                          f"{opts['window']!r}; windows would leave gaps")
    aggregates = tuple(split_top_level(opts["aggregates"]))
    try:
        parse_aggregates(list(aggregates))
    except ConfigError as exc:
        raise ConfigError(f"option aggregates={opts['aggregates']!r}: {exc}") from exc
    seq = opts.get("sequenceColumn", "").strip()
    end = opts.get("endOfInputColumn", "").strip()
    return SinkConfig(
        path=opts["path"].strip(),
        n_inputs=int_option("inputs", opts["inputs"], 1),
        input_column=_one_name("inputColumn", opts.get("inputColumn", "input")),
        timestamp_column=_one_name("timestampColumn", opts.get("timestampColumn", "ts")),
        key_columns=split_names("keyColumns", opts.get("keyColumns", "")),
        window_ms=window_ms,
        slide_ms=slide_ms,
        aggregates=aggregates,
        out_of_order=choice_option("outOfOrder", opts.get("outOfOrder", "fail"), ("fail", "drop")),
        state_location=_state_location(opts),
        sequence_column=_one_name("sequenceColumn", seq) if seq else None,
        end_column=_one_name("endOfInputColumn", end) if end else None,
        keep_versions=int_option("keepVersions", opts.get("keepVersions", "10"), 1),
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
    spec = WindowSpec(size_ms=config.window_ms, slide_ms=config.slide_ms)
    return OrderedAggregation(config.n_inputs, spec, list(config.key_columns),
                              list(config.aggregates), ts_column=config.timestamp_column,
                              out_of_order=config.out_of_order, input_schema=schema)


# -- on-disk layout ----------------------------------------------------------------------------


def _batch_name(batch_id: int) -> str:
    return f"batch-{batch_id:012d}"


def staging_dir(config: SinkConfig, batch_id: int) -> Path:
    """Directory where the tasks of ``batch_id`` stage their rows."""
    return Path(config.state_location) / "staging" / _batch_name(batch_id)


def _commit_path(config: SinkConfig, name: str) -> Path:
    return Path(config.state_location) / "commits" / f"{name}.json"


def _state_path(config: SinkConfig, name: str) -> Path:
    return Path(config.state_location) / "state" / f"{name}.state"


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a hidden temp file, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_commits(config: SinkConfig) -> list[dict[str, Any]]:
    """Every commit marker of the sink, in batch order (the ``final`` marker last)."""
    directory = Path(config.state_location) / "commits"
    if not directory.is_dir():
        return []
    records = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    return sorted(records, key=lambda r: (r["batch_id"] == FINAL, r.get("order", 0)))


# -- the committer (driver side, no Spark needed) ----------------------------------------------


class SinkCommitter:
    """Applies staged micro-batches to the versioned sink state; idempotent per batch id.

    Parameters
    ----------
    config:
        The parsed sink options.

    Notes
    -----
    Called on the driver (from :meth:`OrderedAggStreamWriter.commit` or :func:`finish_sink`),
    one batch at a time, in batch-id order, as Spark does. A fresh instance per call is fine: all
    state is read from ``stateLocation``.
    """

    def __init__(self, config: SinkConfig) -> None:
        self.config = config

    def _latest(self, before: int | None) -> dict[str, Any] | None:
        records = [r for r in read_commits(self.config) if r["batch_id"] != FINAL]
        if before is not None:
            records = [r for r in records if r["batch_id"] < before]
        return records[-1] if records else None

    def _load(self, record: dict[str, Any] | None) -> OrderedAggregation | None:
        if record is None or record["state"] is None:
            return None
        if record.get("fingerprint") != self.config.fingerprint():
            raise StateError(f"ordered-agg sink state in {self.config.state_location} was "
                             f"written with other options (window, keys, aggregates, inputs...); "
                             f"use a new checkpoint/stateLocation for a changed query")
        path = Path(self.config.state_location) / "state" / record["state"]
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise StateError(f"state file {path} of batch {record['batch_id']} is missing; "
                             f"the sink state is incomplete") from None
        if hashlib.sha256(data).hexdigest() != record["state_sha256"]:
            raise StateError(f"state file {path} does not match its commit marker (corrupt)")
        return OrderedAggregation.restore(data)

    def commit_batch(self, batch_id: int, staged_files: Sequence[str]) -> dict[str, Any]:
        """Commit one micro-batch from its staged Arrow files; return its commit record.

        A batch id that is already committed is a replay: nothing is written and the existing
        record is returned (with ``"replayed": True``).
        """
        marker = _commit_path(self.config, _batch_name(batch_id))
        if marker.exists():
            logger.info("ordered-agg sink: batch %d is already committed; replay ignored",
                        batch_id)
            self._drop_staging(batch_id)
            return {**json.loads(marker.read_text()), "replayed": True}
        if _commit_path(self.config, FINAL).exists():
            raise StateError(f"ordered-agg sink: batch {batch_id} arrived after finish_sink() "
                             f"closed every input; use a new checkpoint/stateLocation")
        previous = self._latest(before=batch_id)
        if previous is None:
            self._check_fresh_output()
        table = _read_staged(staged_files)
        query = self._load(previous)
        finished = set(previous["finished"]) if previous else set()
        if query is None and table is not None:
            query = _new_query(self.config, runtime_schema(self.config, table.schema))
        rows_in, out = 0, None
        if query is not None and table is not None:
            rows_in, out = self._apply(query, table, finished, batch_id)
        return self._record(batch_id, _batch_name(batch_id), query, out, rows_in, finished,
                            order=batch_id)

    def finish(self) -> dict[str, Any] | None:
        """Finish every input and write the windows still open; idempotent.

        Returns the ``final`` commit record, or None when nothing was ever committed.
        """
        marker = _commit_path(self.config, FINAL)
        if marker.exists():
            return {**json.loads(marker.read_text()), "replayed": True}
        previous = self._latest(before=None)
        if previous is None:
            return None
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
        output = None
        if out is not None and out.num_rows and query is not None:
            output = f"part-{name}.parquet"
            _write_parquet(Path(self.config.path) / output, _window_types(out, query))
        state_name, digest = None, None
        if query is not None:
            data = query.snapshot()
            state_name, digest = f"{name}.state", hashlib.sha256(data).hexdigest()
            _write_atomically(_state_path(self.config, name), data)
        record = {
            "format_version": SINK_FORMAT_VERSION, "batch_id": batch_id, "order": order,
            "rows_in": rows_in, "rows_out": 0 if out is None else out.num_rows,
            "output": output, "state": state_name, "state_sha256": digest,
            "finished": sorted(finished), "fingerprint": self.config.fingerprint(),
            "ready_bound": None if query is None else query.merge.ready_bound,
            "dropped": None if query is None else query.merge.dropped,
        }
        _write_atomically(_commit_path(self.config, name), json.dumps(record).encode())
        if isinstance(batch_id, int):
            self._drop_staging(batch_id)
        self._prune()
        logger.info("ordered-agg sink: committed %s: %d rows in, %d rows out", name, rows_in,
                    record["rows_out"])
        return record

    def _check_fresh_output(self) -> None:
        out = Path(self.config.path)
        if out.is_dir() and any(out.glob("part-*.parquet")):
            raise StateError(f"output path {out} already holds results but the sink state in "
                             f"{self.config.state_location} is empty; restart with the original "
                             f"checkpoint or write to a new path")

    def _drop_staging(self, batch_id: int) -> None:
        """Remove the staging of this batch and of any older (aborted) batch."""
        root = Path(self.config.state_location) / "staging"
        if not root.is_dir():
            return
        for directory in root.iterdir():
            if directory.name <= _batch_name(batch_id):
                shutil.rmtree(directory, ignore_errors=True)

    def _prune(self) -> None:
        """Keep the state files of the last ``keep_versions`` commits."""
        keep = {r["state"] for r in read_commits(self.config)[-self.config.keep_versions:]}
        directory = Path(self.config.state_location) / "state"
        for path in directory.glob("*.state"):
            if path.name not in keep:
                path.unlink(missing_ok=True)


def _window_types(out: pa.Table, query: OrderedAggregation) -> pa.Table:
    """Give ``window_start``/``window_end`` the input's timestamp type (UTC micros) if it has one.

    Integer event times stay int64 milliseconds, as in the ``ordered-agg`` source.
    """
    ts_type = query.window.input_schema.field(query.window.ts_column).type
    if not pa.types.is_timestamp(ts_type):
        return out
    for name in ("window_start", "window_end"):
        micros = pc.multiply(out.column(name), 1000).cast(pa.timestamp("us", tz="UTC"))
        out = out.set_column(out.schema.get_field_index(name), name, micros)
    return out


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
