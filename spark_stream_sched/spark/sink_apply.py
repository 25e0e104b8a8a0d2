"""The driver's part of one ``ordered-agg`` sink micro-batch (no pyspark here).

Bookkeeping, and only the group work the tasks could not do.

The write tasks merged and aggregated their groups on the executors
(:mod:`~spark_stream_sched.spark.sink_groups`); :func:`apply_batch` turns their reports into
the batch's result and next state:

1. the batch's ``R`` from every task's largest event time per input and end-of-input rows;
   rows below what earlier batches saw are refused (``outOfOrder=fail``, naming input and both
   timestamps) or were dropped by the tasks and are counted;
2. with ``sequenceColumn``: the event times of each input along that column must not
   decrease, also across tasks — the driver reads only the input, sequence and event-time
   columns of the staged rows (vectorised) and fails naming input, both sequence values and
   both timestamps, or (``drop``) drops the rows below the running maximum;
3. groups the tasks could not finish alone — rows in several tasks (the stream was not
   partitioned by group), a task that reported an error, or rows dropped in step 2 — are
   merged here from the staged rows (the fallback; counted as ``groups_on_driver``);
4. every other group with state is released from its task's ``R_task`` (or the previous
   batch's ``R``) to the batch's ``R`` — state only, no new rows — so the batch's output is
   exactly what a single merge of all rows would emit at ``R``;
5. results of all groups in the query's output order.

Returns the new group-state map (group -> file), to be recorded in the commit marker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.packets import TS_MAX, event_times
from spark_stream_sched.spark.sink_groups import (
    GROUP_COL,
    Prepared,
    TaskWork,
    Wiring,
    combine_max,
    empty_rows,
    end_rows,
    in_output_order,
    input_ids,
    load_group,
    prepare,
    read_ipc,
    run_group,
    save_group,
    split_by_group,
    task_bound,
)

#: Writer tag of state files the driver writes (rewritten identically by a retried commit).
DRIVER = "driver"


@dataclass
class Applied:
    """The result of one batch on the driver (see module doc)."""

    output: pa.Table | None
    groups: dict[str, str]
    input_max: list[int | None]
    finished: set[int]
    bound: int | None
    rows_in: int
    dropped: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Staged:
    """One write task's staged rows file and what it did with them (None: nothing)."""

    file: str
    work: TaskWork | None


def apply_batch(wiring: Wiring, batch_id: int, batch_name: str, previous: Mapping[str, Any],
                staged: Sequence[Staged], schema: pa.Schema) -> Applied:
    """Steps 1–5 of the module doc for one batch.

    ``previous`` is batch N-1's marker ({} for none); ``schema`` the runtime schema
    (input/end/sequence columns removed).

    Raises
    ------
    InputError
        Out-of-order rows under ``outOfOrder=fail``, rows for a finished input, a bad input id
        or event time (named).
    StateError
        A staged or state file cannot be read (named).
    """
    started = time.process_time()
    n = wiring.n_inputs
    names: dict[str, str] = dict(previous.get("groups", {}))
    seen: list[int | None] = list(previous.get("input_max") or [None] * n)
    finished_before = set(previous.get("finished", []))
    fine = [s for s in staged if s.work is not None and s.work.error is None]
    for s in fine:
        assert s.work is not None
        if s.work.late and wiring.spec.out_of_order == "fail":
            raise InputError(f"ordered-agg sink: batch {batch_id}: {s.work.late_example}; an "
                             f"input's event times must not decrease across micro-batches "
                             f"(outOfOrder=fail; set outOfOrder=drop to drop such rows)")
    dropped_rows, redo_rows = _sequence_drops(wiring, batch_id, staged, seen)
    counts = [s.work.groups for s in fine if s.work is not None]
    owners: dict[int, int] = {}
    for groups in counts:
        for g in groups:
            owners[g] = owners.get(g, 0) + 1
    redo = {g for g, k in owners.items() if k > 1}
    prepared: Prepared | None = None
    if redo or redo_rows or len(fine) < len(staged):
        prepared, origin = _prepare_on_driver(wiring, batch_id, staged, seen, dropped_rows,
                                              finished_before)
        for k, s in enumerate(staged):
            if s.work is None or s.work.error is not None or s.file in redo_rows:
                redo |= {int(g) for g in np.unique(prepared.groups[origin == k])}
    works = [s.work for s in fine if s.work is not None]
    seq_dropped = sum(int(dropped_rows[s.file].sum()) for s in fine if s.file in dropped_rows)
    reported = [(w.input_max, w.ends, w.rows) for w in works]
    if prepared is not None:
        unfinished = np.isin(origin, [k for k, s in enumerate(staged)
                                      if s.work is None or s.work.error is not None])
        if unfinished.any():
            part = prepared.select(unfinished)
            reported.append((part.input_max(n), sorted(prepared.ends),
                             np.bincount(part.ids, minlength=n).tolist()))
    batch_max, ends, rows_in = list(seen), set(), 0
    for top, ended, rows in reported:
        batch_max = combine_max(batch_max, top)
        ends |= set(ended)
        rows_in += sum(rows)
        for i in finished_before:
            if rows[i]:
                raise InputError(f"ordered-agg sink: batch {batch_id} has rows for input {i}, "
                                 f"which was declared finished by an end-of-input row")
    finished = finished_before | ends
    bound = task_bound(n, batch_max, finished)
    outputs: list[pa.Table] = []
    for s in fine:
        assert s.work is not None
        if s.work.output is not None:
            part = read_ipc(s.work.output, "staged result file")
            keep = ~np.isin(part.column(GROUP_COL).to_numpy(), list(redo))
            outputs.append(part.filter(pa.array(keep)))
        names.update({str(g): name for g, name in s.work.groups.items() if g not in redo})
    rows_on_driver = 0
    by_group = dict(split_by_group(prepared.rows, prepared.groups)) if prepared else {}
    for g in sorted(redo):
        rows = by_group.get(g, empty_rows(schema))
        rows_on_driver += rows.num_rows
        out, state = run_group(wiring.spec, schema, g, load_group(
            wiring.state_location, g, previous.get("groups", {}).get(str(g))), rows, bound)
        outputs.append(out)
        names[str(g)] = save_group(wiring.state_location, g, batch_name, DRIVER, state)
    used = {g: w.bound for w in works for g in w.groups if g not in redo}
    caught_up = 0
    for key in sorted(names, key=int):
        g = int(key)
        if g in redo or not _behind(used.get(g, previous.get("ready_bound")), bound):
            continue
        out, state = run_group(wiring.spec, schema, g, load_group(
            wiring.state_location, g, names[key]), empty_rows(schema), bound)
        outputs.append(out)
        names[key] = save_group(wiring.state_location, g, batch_name, DRIVER, state)
        caught_up += 1
    dropped = int(previous.get("dropped") or 0) + sum(w.late for w in works) + sum(
        int(m.sum()) for m in dropped_rows.values())
    stats = {"groups_on_driver": len(redo), "rows_on_driver": rows_on_driver,
             "groups_caught_up": caught_up, "tasks": len(staged),
             "tasks_cpu_s": round(sum(w.cpu_s for w in works), 6),
             "driver_cpu_s": round(time.process_time() - started, 6)}
    return Applied(in_output_order(wiring.spec, outputs), names, batch_max, finished, bound,
                   rows_in - seq_dropped, dropped, stats)


def finish_groups(wiring: Wiring, batch_name: str, previous: Mapping[str, Any],
                  schema: pa.Schema) -> tuple[pa.Table | None, dict[str, str]]:
    """Release every group at +infinity (every input finished); results and new state map."""
    names: dict[str, str] = dict(previous.get("groups", {}))
    outputs = []
    for key in sorted(names, key=int):
        g = int(key)
        out, state = run_group(wiring.spec, schema, g, load_group(
            wiring.state_location, g, names[key]), empty_rows(schema), TS_MAX)
        outputs.append(out)
        names[key] = save_group(wiring.state_location, g, batch_name, DRIVER, state)
    return in_output_order(wiring.spec, outputs), names


def _behind(used: int | None, bound: int | None) -> bool:
    return bound is not None and (used is None or bound > used)


def _prepare_on_driver(wiring: Wiring, batch_id: int, staged: Sequence[Staged],
                       seen: Sequence[int | None], dropped: Mapping[str, np.ndarray],
                       finished: set[int]) -> tuple[Prepared, np.ndarray]:
    """All staged rows prepared at once, minus rows dropped as out of order.

    Preparing them together keeps ``__seq`` ranks unique in the batch. Also returns the index
    of the staged file of each row.
    """
    tables = [read_ipc(s.file, "staged file") for s in staged]
    table = pa.concat_tables(tables, promote_options="permissive")
    origin = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
    mask = np.concatenate([dropped.get(s.file, np.zeros(t.num_rows, dtype=bool))
                           for s, t in zip(staged, tables, strict=True)])
    data = ~end_rows(table, wiring)
    prep = prepare(table, wiring, batch_id)
    origin, keep = origin[data], ~mask[data]
    for i in sorted(finished):
        if (prep.ids == i).any():
            raise InputError(f"ordered-agg sink: batch {batch_id} has rows for input {i}, "
                             f"which was declared finished by an end-of-input row")
    for i, top in enumerate(seen):
        if top is None:
            continue
        late = (prep.ids == i) & (prep.ts < top)
        if late.any() and wiring.spec.out_of_order == "fail":
            first = int(np.flatnonzero(late)[0])
            raise InputError(f"ordered-agg sink: batch {batch_id}: input {i} sent ts "
                             f"{int(prep.ts[first])} after ts {top} in an earlier batch; an "
                             f"input's event times must not decrease across micro-batches "
                             f"(outOfOrder=fail; set outOfOrder=drop to drop such rows)")
        keep &= ~late
    return (prep, origin) if keep.all() else (prep.select(keep), origin[keep])


def _sequence_drops(wiring: Wiring, batch_id: int, staged: Sequence[Staged],
                    seen: Sequence[int | None]) -> tuple[dict[str, np.ndarray], set[str]]:
    """Step 2: rows whose ts decreases along ``sequenceColumn`` (per staged file, a mask).

    Returns the masks (only files with such rows) and the set of those files.
    """
    seq_name = wiring.sequence_column
    if seq_name is None or not staged:
        return {}, set()
    columns = [wiring.input_column, seq_name, wiring.spec.timestamp_column]
    if wiring.end_column:
        columns.append(wiring.end_column)
    tables = [read_ipc(s.file, "staged file").select(columns) for s in staged]
    sizes = [t.num_rows for t in tables]
    table = pa.concat_tables(tables)
    ids = input_ids(table, wiring, batch_id)
    data = ~end_rows(table, wiring)
    ts = np.full(table.num_rows, np.iinfo(np.int64).min, np.int64)
    if data.any():
        ts[data] = event_times(table.filter(pa.array(data)), wiring.spec.timestamp_column,
                               f"ordered-agg sink batch {batch_id}")
    seq_column = table.column(seq_name)
    if seq_column.null_count:
        raise InputError(f"ordered-agg sink: batch {batch_id}: sequenceColumn {seq_name!r} is "
                         f"null in {seq_column.null_count} rows")
    # One stable Arrow sort by (input, sequence) (strings sort natively; as NumPy objects they
    # sort in Python, ~2x slower): each input's data rows are then one run in sequence order.
    order = pc.sort_indices(pa.table({"i": pa.array(ids), "s": seq_column}),
                            sort_keys=[("i", "ascending"), ("s", "ascending")]).to_numpy()
    order = order[data[order]]
    sorted_ids = ids[order]
    dropped = np.zeros(table.num_rows, dtype=bool)
    for i in np.unique(sorted_ids).tolist():
        lo, hi = np.searchsorted(sorted_ids, [i, i + 1])
        where = order[lo:hi]
        start = seen[i] if seen[i] is not None else np.iinfo(np.int64).min
        before = np.maximum.accumulate(np.concatenate([[start], ts[where]]))[:-1]
        bad = ts[where] < before
        if not bad.any():
            continue
        if wiring.spec.out_of_order == "fail":
            k = int(np.flatnonzero(bad)[0])
            top = int(np.flatnonzero(ts[where[:k]] == before[k])[-1]) if k else None
            earlier = ("an earlier batch" if top is None else
                       f"{seq_name} {seq_column[int(where[top])].as_py()!r}")
            value = seq_column[int(where[k])].as_py()
            raise InputError(f"ordered-agg sink: batch {batch_id}: input {i} is out of order "
                             f"along {seq_name!r}: {seq_name} {value!r} has ts "
                             f"{int(ts[where[k]])} after ts {int(before[k])} at {earlier} "
                             f"(outOfOrder=fail; set outOfOrder=drop to drop such rows)")
        dropped[where[bad]] = True
    masks, offset = {}, 0
    for s, size in zip(staged, sizes, strict=True):
        part = dropped[offset:offset + size]
        offset += size
        if part.any():
            masks[s.file] = part
    return masks, set(masks)


def check_previous(previous: Mapping[str, Any], location: str) -> None:
    """Refuse a commit log written by the driver-only sink (format 1)."""
    if previous and "groups" not in previous:
        raise StateError(f"the ordered-agg sink state in {location} was written by an older "
                         f"release (one state file per batch, merged on the driver); this "
                         f"release keeps state per partition group. Finish that query with the "
                         f"release that started it, or start with a new checkpointLocation, "
                         f"stateLocation and output path")


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
