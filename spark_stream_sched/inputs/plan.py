"""The ``ordered-agg`` source's query plan: options + input schema, and the rows between offsets.

:class:`SourcePlan` is what the streaming reader and the batch reader resolve once on the driver
and ship to every task (picklable): the validated options (:class:`~spark_stream_sched.options.
source.SourceConfig`) and the input schema. :func:`rows_between` reads the rows of every input
between two offsets with ``__input``/``__seq``; the helpers below are the driver's planning
rules (which files an offset spans, idle inputs, empty inputs). Pure Python + PyArrow.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.inputs.consumed import batch_start
from spark_stream_sched.inputs.cursors import read_between
from spark_stream_sched.inputs.offsets import Offset
from spark_stream_sched.inputs.schema import resolve_schema
from spark_stream_sched.inputs.streams import Cursor, InputStream
from spark_stream_sched.options.source import SourceConfig, parse_options
from spark_stream_sched.runtime.engine.batch import GroupedBatch
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.state.input_schema import read_input_schema
from spark_stream_sched.runtime.window.aggregator import BOUND_COLUMNS, SPARK_TIMESTAMP

log = logging.getLogger(__name__)

#: Arrow record batches yielded by read() hold at most this many rows.
OUTPUT_BATCH_ROWS = 65_536
#: Rows per micro-batch of a ``Trigger.AvailableNow`` run when ``maxRecordsPerTrigger`` is not
#: set: catch-up is dominated by the fixed cost per micro-batch (~0.25-0.3 s in local[2]), so
#: it admits larger batches than a continuous stream (``DEFAULT_MAX_RECORDS_PER_TRIGGER``).
AVAILABLE_NOW_MAX_RECORDS = 2_000_000


@dataclass(frozen=True)
class SourcePlan:
    """Validated options plus the resolved input schema (picklable; shipped to executors)."""

    config: SourceConfig
    input_schema: pa.Schema
    #: whether option ``maxRecordsPerTrigger`` was given (else AvailableNow may admit more)
    max_records_explicit: bool = False

    @property
    def streams(self) -> list[InputStream]:
        """The input streams, in input-id order, read with :attr:`read_schema`'s columns."""
        return [InputStream(i, p, self.config.format, self.read_schema)
                for i, p in enumerate(self.config.inputs)]

    @functools.cached_property
    def read_schema(self) -> pa.Schema:
        """The input columns the query uses (:meth:`QuerySpec.used_columns`): all that is read.

        Parquet then decodes only these columns (on the bench's inputs a third of the bytes: a
        string and an integer column no aggregate reads), and the batch's rows, their split by
        partition group and the rows a group keeps pending are that much smaller. A column the
        query does not use is not checked either: a file may lack it or hold it with another
        type.
        """
        used = set(self.config.spec.used_columns(self.input_schema))
        return pa.schema([f for f in self.input_schema if f.name in used],
                         metadata=self.input_schema.metadata)

    @property
    def ts_is_timestamp(self) -> bool:
        """Whether the input event time is a timestamp (else int64 milliseconds)."""
        ts_type = self.input_schema.field(self.config.timestamp_column).type
        return bool(pa.types.is_timestamp(ts_type))

    def batch(self, groups: Sequence[int], pushes: Sequence[int] = ()) -> GroupedBatch:
        """The runtime's micro-batch entry for ``groups`` (``pushes``: pushed to disk first)."""
        c = self.config
        return GroupedBatch(c.spec, self.read_schema, tuple(groups), c.scheduler, c.workers,
                            tuple(pushes), spill_location=c.spill_location)

    def output_arrow_schema(self) -> pa.Schema:
        """Arrow schema of the result rows (window bounds as timestamps for timestamp input)."""
        schema = self.config.spec.build(self.input_schema).output_schema
        if self.ts_is_timestamp:
            for name in BOUND_COLUMNS:
                if name in schema.names:
                    schema = schema.set(schema.get_field_index(name),
                                        pa.field(name, SPARK_TIMESTAMP))
        return schema


def build_plan(options: Any, streaming: bool = True) -> SourcePlan:
    """Parse options and resolve the input schema (:func:`input_schema`).

    ``streaming`` False: a batch read, which needs no ``stateLocation``.

    Notes
    -----
    Called on the driver; raises :class:`~spark_stream_sched.errors.ConfigError` early.
    """
    config = parse_options(dict(options), streaming)
    schema = input_schema(config)
    config.spec.build(schema)  # columns, key, aggregate and filter types are checked here
    explicit = any(str(k).lower() == "maxrecordspertrigger" for k in dict(options))
    return SourcePlan(config, schema, explicit)


def input_schema(config: SourceConfig) -> pa.Schema:
    """Option ``schema``, else the one recorded in ``stateLocation``, else the inferred one.

    The schema a stream resolved at its first start is recorded there
    (:func:`~spark_stream_sched.runtime.state.input_schema.record_input_schema`, called when
    the stream starts), so a restart reads its files as the first start did, whatever files
    are left to infer from. A batch read given the stream's ``stateLocation`` reads the
    files with the stream's schema too (``schema()`` cannot tell the two apart).
    """
    if config.schema is None and config.state_location:
        recorded = read_input_schema(config.state_location)
        if recorded is not None:
            return recorded
    return resolve_schema(config.inputs, config.format, config.schema)


def rows_between(plan: SourcePlan, files: tuple[tuple[str, ...], ...], start: Offset,
                 end: Offset, warn: bool = False) -> pa.Table:
    """Rows of all inputs between the offsets, with ``__input``/``__seq`` columns.

    ``warn``: log rows dropped as out of order (:func:`~.cursors.read_between`).
    """
    c = plan.config
    parts = []
    for j, stream in enumerate(plan.streams):
        first = batch_start(start.cursors[j], files[j])  # past a deleted file read to the end
        rows, _, seq = read_between(stream, list(files[j]), first, end.cursors[j],
                                    c.timestamp_column, c.out_of_order, warn)
        rows = rows.append_column(INPUT_COL, pa.array(np.full(len(seq), j, np.int32)))
        parts.append(rows.append_column(SEQ_COL, pa.array(seq)))
    return pa.concat_tables(parts)


# -- the driver's planning rules -----------------------------------------------------------


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


def files_after(files: list[str], current: str | None) -> list[str]:
    """Files after ``current`` (the file a cursor is in; all of them when None)."""
    return files[files.index(current) + 1:] if current in files else list(files)


def files_between(files: list[str], first: str | None, last: str | None) -> tuple[str, ...]:
    """Files from ``first`` (or the beginning) through ``last`` (none when ``last`` is None)."""
    if last is None:
        return ()
    lo = files.index(first) if first in files else 0
    return tuple(f for f in files[lo:] if f <= last)


def mark_idle(before: tuple[Cursor, ...], after: tuple[Cursor, ...],
              quiet_since: dict[int, float], now: float, timeout_ms: int) -> tuple[Cursor, ...]:
    """Record in the end offset which inputs are idle (option ``idleTimeout``).

    An input is idle once it has had no new row for ``timeout_ms`` of wall-clock time on the
    driver; it stays idle (also across restarts, since the flag is in the offset) until its next
    row. The decision is part of the offset Spark logs before running the batch, so replays see
    the same ready bound. ``quiet_since`` (input id -> clock reading when its latest row was
    seen) is the driver's memory across batches and is updated here; ``now`` is that clock.
    """
    marked = []
    for j, (old, new) in enumerate(zip(before, after, strict=True)):
        if new.finished or new.seq > old.seq:
            quiet_since[j] = now  # its latest row was seen now
            marked.append(replace(new, idle=False))
            continue
        since = quiet_since.setdefault(j, now)
        idle = old.idle or (now - since) * 1000 >= timeout_ms
        if idle and not old.idle:
            log.info("input %d had no new row for %.1f s: idle (idleTimeout)", j, now - since)
        marked.append(replace(new, idle=idle))
    return tuple(marked)
