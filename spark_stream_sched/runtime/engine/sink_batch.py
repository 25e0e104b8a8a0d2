"""A write task of the ``ordered-agg`` sink, on the engine's one batch entry (executors).

:func:`run_task` prepares the task's staged rows (:func:`~.sink_rows.prepare`), checks them
against the previous commit (finished inputs, rows below what an earlier batch had of their
input) and runs the partition groups it has rows of through
:class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch` from the previous version to its
own ready bound ``R_task``: :func:`~spark_stream_sched.runtime.merge.ready_bound` over the
largest event time per input that the previous commits and *its* rows saw, with the finished
inputs and the idle flags the previous commit decided. It writes the groups' new state into the
batch's version (:class:`~spark_stream_sched.runtime.state.files.FileStateStore`, the source's
layout) and stages its results; its report (:class:`TaskWork`) reaches the driver in the commit
message. It never raises for bad input or state: it reports why, and the driver redoes its rows
with the whole batch in view (:mod:`~.sink_commit_step`).

``R_task`` is never above the batch's ``R``: a task sees a subset of the rows, and the driver
uses the same finished inputs and idle flags, so every group can be caught up to ``R`` later.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.distribution.loads import spills_itself
from spark_stream_sched.runtime.engine.batch import GroupedBatch, query_hold
from spark_stream_sched.runtime.engine.sink_config import GROUP_COL, SinkConfig
from spark_stream_sched.runtime.engine.sink_rows import (
    combine_max,
    late_mask,
    prepare,
    refuse_finished,
)
from spark_stream_sched.runtime.merge import ready_bound
from spark_stream_sched.runtime.packets import EVENT_TIME_MIN, TS_MAX
from spark_stream_sched.runtime.state.atomic import atomic_writer
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.state.store import BatchStore, Entry, StateStore
from spark_stream_sched.runtime.state.usage import process_rss

logger = logging.getLogger(__name__)

#: Writer tag of the state files the commit writes (rewritten identically by a retried commit).
DRIVER = "driver"
#: The error for a row below the released bound at the sink (an input that was idle).
SINK_LATE = ("ordered-agg sink: input {input} sent ts {ts}, below the ready bound {bound} "
             "already released while the input was idle (idleTimeout); raise idleTimeout or "
             "set outOfOrder=drop to drop such rows")


@dataclass
class TaskWork:
    """What one write task did for its groups (travels in its commit message)."""

    groups: dict[int, Entry | None] = field(default_factory=dict)
    bound: int | None = None
    output: str | None = None
    input_max: list[int | None] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    late: int = 0
    late_example: str | None = None
    cpu_s: float = 0.0
    rss: int | None = None
    error: str | None = None
    #: Wall clock (Unix seconds) when the task began, and bytes its join stages pushed to disk.
    started_at: float | None = None
    spill_bytes: int = 0


@dataclass(frozen=True)
class Previous:
    """What batch N-1's commit marker says (the empty one before the first batch)."""

    version: str | None
    input_max: list[int | None]
    finished: set[int]
    bound: int | None
    idle: list[bool]
    last_rows_at: list[float | None]
    dropped: int
    hold: int | None = None

    def entries(self, store: StateStore) -> dict[int, Entry | None] | None:
        """The entries of the version the marker names (None before the first batch)."""
        return None if self.version is None else store.entries(self.version, (DRIVER,))

    @classmethod
    def of(cls, marker: Mapping[str, Any] | None, n_inputs: int) -> Previous:
        """Read a commit marker's fields (None: before the first batch).

        ``hold`` is the hold bound the batch released under (``release_hold``); a marker
        written before it was recorded gives :data:`~..packets.EVENT_TIME_MIN`, so the next
        commit catches every group up once (:func:`released_to`).
        """
        m = marker or {}
        return cls(m.get("version"), list(m.get("input_max") or [None] * n_inputs),
                   set(m.get("finished", [])), m.get("ready_bound"),
                   list(m.get("idle_next") or [False] * n_inputs),
                   list(m.get("last_rows_at") or [None] * n_inputs), int(m.get("dropped") or 0),
                   m.get("release_hold", EVENT_TIME_MIN if m else None))


def batch_store(store: StateStore, previous: Previous, version: str, writer: str,
                start: Mapping[int, Entry | None] | None) -> BatchStore:
    """A batch's view of the sink state, from ``start`` (None: the first batch) to ``version``."""
    return BatchStore(store, start, version, writer, commit=False,
                      where=f"state version {previous.version}")


# -- a write task (executors) ------------------------------------------------------------------


def run_task(config: SinkConfig, batch_id: int, table: pa.Table, version: str, writer: str,
             marker: Mapping[str, Any] | None, staged_dir: Path) -> TaskWork:
    """Process the groups of one task's rows on the executor (module doc).

    ``marker``: batch N-1's commit marker (None before the first batch, or unreadable).
    """
    started, wall_started = time.process_time(), time.time()
    work = TaskWork()
    try:
        if marker is None and batch_id > 0:
            raise StateError(f"the commit marker of batch {batch_id - 1} is not readable")
        _run_task(config, batch_id, table, version, writer, Previous.of(marker, config.n_inputs),
                  staged_dir, work)
    except (InputError, StateError) as exc:
        logger.info("ordered-agg sink task %s: left to the driver: %s", writer, exc)
        work = TaskWork(error=str(exc))
    work.cpu_s = round(time.process_time() - started, 6)
    work.rss, work.started_at = process_rss(), round(wall_started, 3)
    return work


def _run_task(config: SinkConfig, batch_id: int, table: pa.Table, version: str, writer: str,
              previous: Previous, staged_dir: Path, work: TaskWork) -> None:
    n = config.n_inputs
    prep = prepare(table, config, batch_id)
    refuse_finished(prep, previous.finished, batch_id)
    late, example = late_mask(prep, previous.input_max)
    if late.any():
        work.late, work.late_example = int(late.sum()), example
        if config.spec.out_of_order == "fail":
            raise InputError(str(example))
        prep = prep.select(~late)
    work.input_max, work.ends, work.rows = prep.input_max(n), sorted(prep.ends), prep.counts(n)
    work.bound = ready_bound(combine_max(previous.input_max, work.input_max),
                             [i in previous.finished | prep.ends for i in range(n)],
                             previous.idle)
    files = FileStateStore(config.state_location)
    store = batch_store(files, previous, version, writer, previous.entries(files))
    groups = tuple(sorted({int(g) for g in np.unique(prep.groups)}))
    result = sink_batch(config, prep.rows.schema, groups).run(
        prep.rows, store, previous.bound, work.bound, sink_hold(config, previous, store.start))
    work.groups = dict(store.written)
    work.spill_bytes = sum(int(result.metrics.get(f"join_{name}") or 0)
                           for name in ("pushed_bytes", "held_pushed_bytes"))
    staged = tagged(result.per_group)
    if staged is not None:
        work.output = str(staged_dir / f"result-{writer}-{uuid.uuid4().hex[:8]}.arrow")
        write_ipc(work.output, staged)


def sink_batch(config: SinkConfig, schema: pa.Schema, groups: Sequence[int]) -> GroupedBatch:
    """The engine's batch entry for the sink's ``groups`` (rows prepared by ``prepare``)."""
    return GroupedBatch(config.spec, without_internal(schema), tuple(groups), late=SINK_LATE,
                        spill_location=config.spill_location)


def sink_hold(config: SinkConfig, previous: Previous,
              start: Mapping[int, Entry | None] | None) -> int | None:
    """The query's hold bound for a sink batch (see :mod:`~.batch` for the source's).

    The least ``H`` the previous version recorded; with a join that pushes state itself (a
    ``budget``), also the previous ``R``: a task pushes at its own bound, which is at least the
    previous ``R`` but may be below the batch's, so a batch releases only what the previous one
    could have (its windows leave one batch later). Before the first ``R`` the previous batch
    released nothing, so neither does this one: the hold is :data:`~..packets.EVENT_TIME_MIN`
    (before, it was None -- no hold -- and a group the driver ran released windows up to ``R``
    while a task had pushed another group's state at a lower bound of its own; the next batch's
    hold then sent that window's bound back).
    """
    if spills_itself(config.spec) and previous.bound is None:
        return EVENT_TIME_MIN
    return query_hold(start or {}, previous.bound, spills_itself(config.spec))


def released_to(bound: int | None, hold: int | None) -> int | None:
    """How far a group run to ``bound`` under the query's ``hold`` released: ``min(R, hold)``.

    A group's results (a join's, and the windows after it) leave below the smaller of the two,
    so a group is behind a batch when the batch's ``released_to`` is above the one it last ran
    with, whether ``R`` or the hold rose (None: nothing released). At ``R`` = +infinity
    (every input finished) nothing is held (:meth:`~.batch.GroupedBatch.run`): everything.
    """
    if bound is None or hold is None or bound == TS_MAX:
        return bound
    return min(bound, hold)


def without_internal(schema: pa.Schema) -> pa.Schema:
    """``schema`` without ``__input``/``__seq`` (the runtime schema of prepared rows)."""
    return pa.schema([f for f in schema if not f.name.startswith("__")])


def tagged(per_group: Mapping[int, pa.Table]) -> pa.Table | None:
    """The groups' results with :data:`GROUP_COL` (None when there is none)."""
    parts = [t.append_column(GROUP_COL, pa.array(np.full(t.num_rows, g, np.int32)))
             for g, t in per_group.items() if t.num_rows]
    return pa.concat_tables(parts, promote_options="permissive") if parts else None


def write_ipc(path: str, table: pa.Table) -> None:
    """Write ``table`` as one Arrow IPC file, atomically."""
    with atomic_writer(path) as tmp, pa.ipc.new_file(tmp, table.schema) as writer:
        writer.write_table(table)


def read_ipc(path: str, what: str) -> pa.Table:
    """Read a staged Arrow IPC file; StateError naming it when unreadable."""
    try:
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowInvalid) as exc:
        raise StateError(f"{what} {path} cannot be read ({exc}); the batch cannot be "
                         f"committed; restart the query from its checkpoint") from exc
