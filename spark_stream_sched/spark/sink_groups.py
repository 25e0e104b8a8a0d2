"""The ``ordered-agg`` sink's per-partition-group work, on executors (no pyspark here).

Each write task of micro-batch ``N`` merges and aggregates the rows it received **for the
partition groups whose rows it holds** — the heavy, row-proportional work — on the executor:

1. give each row its place in the total order ``(ts, input, seq)``: ``seq`` is
   ``N << 32 | rank`` where ``rank`` orders the batch's rows of one input by ``(ts,
   sequenceColumn)`` (without ``sequenceColumn``: by the row values), so rows of an earlier
   batch come first and ties are broken the same way by any task or the driver;
2. per group (stable key hash, as in the source): load the group's state named by batch
   ``N-1``'s commit marker, release the rows with ``ts < R_task`` in the total order, run the
   pipeline / window operators, write the new state as ``state/groups/<group>-<batch>-<task>``;
3. stage the results (with their group) as one Arrow IPC file and report, per input, the
   largest ``ts`` and whether an end-of-input row came, and rows below what earlier batches
   had already seen (late).

``R_task = min over inputs of (the input's largest ts up to batch N-1, or in this task's rows
if larger)`` (+infinity for a finished input). It is a lower bound of the batch's ``R``: an
input's later rows never have a smaller ts (the input contract), so no row is released before
it is ready. The driver (:mod:`~spark_stream_sched.spark.sink_commit`) then computes the batch's
``R`` from every task's report and releases, per group, what lies between ``R_task`` and ``R``
(state only, no new rows), so each batch's output does not depend on how Spark spread the rows
over tasks. Only a group whose rows reached several tasks, or that a task could not process,
is merged on the driver from the staged rows — the stream is then not partitioned by group; see
:func:`spark_stream_sched.spark.sink.partition_for_sink`.

State files are runtime snapshots of kind :data:`GROUP_KIND` (checksummed Arrow IPC, never
pickle). A task's files are named after the task attempt, so a retried or speculative attempt
never overwrites another's; the commit marker names the files that count.
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
import pyarrow.compute as pc

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.keyed.pipeline import (
    result_order,
    sort_ascending,
    without_internal_columns,
)
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX, event_times
from spark_stream_sched.runtime.query.batch import GroupedBatch
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.state.atomic import atomic_writer
from spark_stream_sched.runtime.state.snapshot import read_snapshot, write_snapshot
from spark_stream_sched.runtime.state.versions import GroupState

logger = logging.getLogger(__name__)

#: Column of staged results naming the partition group that produced a row.
GROUP_COL = "__group"
#: Snapshot kind of one group's sink state.
GROUP_KIND = "ordered-agg-sink-group"
#: Directory of group state files under ``<stateLocation>/state``.
GROUPS_DIR = "groups"
_ADVICE = ("restore the sink's state directory from a backup, or start the query with a new "
           "checkpointLocation, stateLocation and output path")


@dataclass(frozen=True)
class Wiring:
    """What the per-group work needs of the sink options (picklable; see ``SinkConfig``)."""

    spec: QuerySpec
    state_location: str
    input_column: str
    sequence_column: str | None
    end_column: str | None

    @property
    def n_inputs(self) -> int:
        """Number of inputs."""
        return self.spec.n_inputs

    def runtime_schema(self, schema: pa.Schema) -> pa.Schema:
        """The columns the operators see (no input-id, end or sequence column)."""
        drop = {self.input_column, self.end_column, self.sequence_column, GROUP_COL}
        return pa.schema([f for f in schema if f.name not in drop])


@dataclass
class Prepared:
    """One table of staged rows made ready for the runtime.

    ``rows`` are the data rows (runtime columns + ``__input`` + ``__seq``), ``groups`` their
    partition groups, ``ids``/``ts`` their input ids and event times, ``ends`` the inputs an
    end-of-input row finished.
    """

    rows: pa.Table
    groups: np.ndarray
    ids: np.ndarray
    ts: np.ndarray
    ends: set[int]
    schema: pa.Schema

    def input_max(self, n_inputs: int) -> list[int | None]:
        """Largest event time per input in these rows (None: no row)."""
        out: list[int | None] = [None] * n_inputs
        if len(self.ts):
            top = np.full(n_inputs, np.iinfo(np.int64).min, np.int64)
            np.maximum.at(top, self.ids, self.ts)
            present = np.bincount(self.ids, minlength=n_inputs) > 0
            out = [int(top[i]) if present[i] else None for i in range(n_inputs)]
        return out

    def select(self, mask: np.ndarray) -> Prepared:
        """The rows where ``mask`` holds."""
        where = pa.array(mask)
        return Prepared(self.rows.filter(where), self.groups[mask], self.ids[mask],
                        self.ts[mask], self.ends, self.schema)


def input_ids(table: pa.Table, wiring: Wiring, batch_id: int) -> np.ndarray:
    """The input id of every staged row; InputError naming the column for a null or bad id."""
    column = table.column(wiring.input_column)
    if column.null_count:
        raise InputError(f"ordered-agg sink: batch {batch_id}: column {wiring.input_column!r} "
                         f"(the input id) is null in {column.null_count} rows")
    ids = np.asarray(column.to_numpy(), dtype=np.int64)
    bad = (ids < 0) | (ids >= wiring.n_inputs)
    if bad.any():
        raise InputError(f"ordered-agg sink: batch {batch_id}: input id {int(ids[bad][0])} in "
                         f"column {wiring.input_column!r} is outside 0..{wiring.n_inputs - 1} "
                         f"(option inputs={wiring.n_inputs})")
    return ids


def end_rows(table: pa.Table, wiring: Wiring) -> np.ndarray:
    """Which staged rows are end-of-input markers (all False without ``endOfInputColumn``)."""
    if wiring.end_column is None:
        return np.zeros(table.num_rows, dtype=bool)
    return np.asarray(table.column(wiring.end_column).fill_null(False)
                      .to_numpy(zero_copy_only=False), dtype=bool)


def _sortable(kind: pa.DataType) -> bool:
    return not (pa.types.is_nested(kind) or pa.types.is_dictionary(kind))


def prepare(table: pa.Table, wiring: Wiring, batch_id: int) -> Prepared:
    """Data rows of ``table`` with ``__input``/``__seq`` and their groups (module doc, step 1).

    Raises
    ------
    InputError
        A null or out-of-range input id, or a null / out-of-range event time (named).
    """
    ids = input_ids(table, wiring, batch_id)
    ends_mask = end_rows(table, wiring)
    ends = {int(i) for i in np.unique(ids[ends_mask])}
    data = table.filter(pa.array(~ends_mask)) if ends_mask.any() else table
    ids = ids[~ends_mask]
    ts_name = wiring.spec.timestamp_column
    ts = event_times(data, ts_name, f"ordered-agg sink batch {batch_id}") if data.num_rows \
        else np.zeros(0, np.int64)
    runtime = wiring.runtime_schema(table.schema)
    ties = ([wiring.sequence_column] if wiring.sequence_column else
            [f.name for f in runtime if f.name != ts_name and _sortable(f.type)])
    keyed = data.select(ties).append_column("__id", pa.array(ids)).append_column(
        "__ts", pa.array(ts))
    order = pc.sort_indices(keyed, sort_keys=[("__id", "ascending"), ("__ts", "ascending")]
                            + [(c, "ascending", "at_start") for c in ties]).to_numpy()
    seq = np.empty(len(order), np.int64)
    seq[order] = (np.int64(batch_id) << np.int64(32)) + np.arange(len(order), dtype=np.int64)
    rows = data.select(runtime.names).append_column(INPUT_COL, pa.array(ids, pa.int32())) \
        .append_column(SEQ_COL, pa.array(seq, pa.int64()))
    groups = GroupedBatch(wiring.spec, runtime, ()).group_ids(rows)
    return Prepared(rows, np.asarray(groups, np.int64), ids, ts, ends, runtime)


def task_bound(n_inputs: int, seen: Sequence[int | None], finished: set[int]) -> int | None:
    """``R`` from the largest event time seen per input (TS_MAX when every input finished)."""
    open_inputs = [seen[i] for i in range(n_inputs) if i not in finished]
    if not open_inputs:
        return TS_MAX
    if any(s is None for s in open_inputs):
        return None
    return int(min(s for s in open_inputs if s is not None))


def combine_max(a: Sequence[int | None], b: Sequence[int | None]) -> list[int | None]:
    """Per-input maximum of two lists of largest event times (None: nothing seen)."""
    return [x if y is None else y if x is None else max(x, y) for x, y in zip(a, b, strict=True)]


# -- group state files ---------------------------------------------------------------------


def groups_dir(location: str) -> Path:
    """``<stateLocation>/state/groups``."""
    return Path(location) / "state" / GROUPS_DIR


def state_name(group: int, batch_name: str, writer: str) -> str:
    """File name of a group's state written in ``batch_name`` by ``writer``."""
    return f"g{group:05d}-{batch_name}-{writer}.state"


def save_group(location: str, group: int, batch_name: str, writer: str,
               state: GroupState) -> str:
    """Write one group's state atomically; return its file name (under :func:`groups_dir`)."""
    name = state_name(group, batch_name, writer)
    tables: dict[str, pa.Table] = {}
    if state.pending is not None:
        tables["pending"] = state.pending
    if state.window is not None:
        tables["window"] = pa.table({"snapshot": pa.array([state.window], pa.binary())})
    write_snapshot(str(groups_dir(location) / name), GROUP_KIND,
                   {"group": group, "batch": batch_name}, tables, sync_dir=False)
    return name


def load_group(location: str, group: int, name: str | None) -> GroupState:
    """Read a group's state file (an empty state for ``None``); StateError naming the file."""
    if name is None:
        return GroupState()
    meta, tables = read_snapshot(str(groups_dir(location) / name), GROUP_KIND,
                                 f"state of partition group {group}", _ADVICE)
    if meta.get("group") != group:
        raise StateError(f"state file {groups_dir(location) / name} holds group "
                         f"{meta.get('group')}, not {group}; {_ADVICE}")
    window = tables["window"].column(0)[0].as_py() if "window" in tables else None
    return GroupState(tables.get("pending"), window)


# -- running groups ------------------------------------------------------------------------


def run_group(spec: QuerySpec, schema: pa.Schema, group: int, state: GroupState,
              rows: pa.Table, bound: int | None) -> tuple[pa.Table, GroupState]:
    """Release the group's ready rows at ``bound`` and run its operators (module doc, step 2).

    The output keeps ``__input``/``__seq`` where the pipeline has them (rows are sorted across
    groups later) and gains :data:`GROUP_COL`.
    """
    batch = GroupedBatch(spec, schema, (group,))
    snapshot, released, pending = batch.release(state, rows, bound)
    operator = spec.build_group(schema, snapshot)
    out = operator.update(released, bound)
    out = out.append_column(GROUP_COL, pa.array(np.full(out.num_rows, group, np.int32)))
    return out, GroupState(pending, operator.snapshot())


def in_output_order(spec: QuerySpec, parts: Sequence[pa.Table]) -> pa.Table | None:
    """Results of several groups in the query's output order, internal columns removed."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return None
    out = pa.concat_tables(parts, promote_options="permissive")
    order = result_order(spec.operators, spec.window is not None, spec.key_columns,
                         spec.timestamp_column)
    out = sort_ascending(out, order)
    return without_internal_columns(out.drop_columns([GROUP_COL]))


def empty_rows(schema: pa.Schema) -> pa.Table:
    """No rows, with the runtime columns plus ``__input``/``__seq``."""
    return schema.append(pa.field(INPUT_COL, pa.int32())).append(
        pa.field(SEQ_COL, pa.int64())).empty_table()


@dataclass
class TaskWork:
    """What one write task did for its groups (travels in its commit message)."""

    groups: dict[int, str] = field(default_factory=dict)
    bound: int | None = None
    output: str | None = None
    input_max: list[int | None] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    late: int = 0
    late_example: str | None = None
    cpu_s: float = 0.0
    error: str | None = None


def run_task(wiring: Wiring, batch_id: int, table: pa.Table, batch_name: str,
             writer: str, previous: Mapping[str, Any] | None, staged_dir: Path) -> TaskWork:
    """Process the groups of one task's rows on the executor (module doc).

    Never raises for bad input or state: a task that cannot process its rows reports why,
    and the driver redoes them (and raises the error with the whole batch in view).
    """
    started = time.process_time()
    work = TaskWork()
    try:
        if previous is None and batch_id > 0:
            raise StateError(f"the commit marker of batch {batch_id - 1} is not readable")
        if previous is not None and "groups" not in previous:
            raise StateError("the previous commit was written by the driver-only sink format")
        _run_task(wiring, batch_id, table, batch_name, writer, previous or {}, staged_dir, work)
    except (InputError, StateError) as exc:
        logger.info("ordered-agg sink task %s: left to the driver: %s", writer, exc)
        work = TaskWork(error=str(exc))
    work.cpu_s = round(time.process_time() - started, 6)
    return work


def _run_task(wiring: Wiring, batch_id: int, table: pa.Table, batch_name: str, writer: str,
              previous: Mapping[str, Any], staged_dir: Path, work: TaskWork) -> None:
    n = wiring.n_inputs
    prep = prepare(table, wiring, batch_id)
    finished = set(previous.get("finished", []))
    seen: list[int | None] = list(previous.get("input_max") or [None] * n)
    if np.isin(prep.ids, list(finished)).any():
        raise InputError("rows for a finished input")
    late = np.zeros(len(prep.ts), dtype=bool)
    for i, top in enumerate(seen):
        if top is not None:
            late |= (prep.ids == i) & (prep.ts < top)
    if late.any():
        first = int(np.flatnonzero(late)[0])
        work.late = int(late.sum())
        work.late_example = (f"input {int(prep.ids[first])} sent ts {int(prep.ts[first])} after "
                             f"ts {seen[int(prep.ids[first])]} in an earlier batch")
        if wiring.spec.out_of_order == "fail":
            raise InputError(work.late_example)
        prep = prep.select(~late)
    work.input_max = prep.input_max(n)
    work.ends = sorted(prep.ends)
    work.rows = np.bincount(prep.ids, minlength=n).tolist()
    work.bound = task_bound(n, combine_max(seen, work.input_max), finished | prep.ends)
    names: dict[str, str] = previous.get("groups", {})
    outputs = []
    for g, rows in split_by_group(prep.rows, prep.groups):
        state = load_group(wiring.state_location, g, names.get(str(g)))
        out, new = run_group(wiring.spec, prep.schema, g, state, rows, work.bound)
        outputs.append(out)
        work.groups[g] = save_group(wiring.state_location, g, batch_name, writer, new)
    if any(o.num_rows for o in outputs):
        work.output = str(staged_dir / f"result-{writer}-{uuid.uuid4().hex[:8]}.arrow")
        write_ipc(work.output, pa.concat_tables([o for o in outputs if o.num_rows],
                                                promote_options="permissive"))


def split_by_group(rows: pa.Table, groups: np.ndarray) -> list[tuple[int, pa.Table]]:
    """``rows`` cut into one table per group (ascending ids), keeping each group's row order.

    One stable sort and slices, instead of one filter over all rows per group.
    """
    if len(groups) == 0:
        return []
    order = np.argsort(groups, kind="stable")
    ordered, sorted_groups = rows.take(pa.array(order)), groups[order]
    ids, starts = np.unique(sorted_groups, return_index=True)
    ends = [*starts[1:].tolist(), len(order)]
    return [(int(g), ordered.slice(int(a), int(b) - int(a)))
            for g, a, b in zip(ids.tolist(), starts.tolist(), ends, strict=True)]


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
