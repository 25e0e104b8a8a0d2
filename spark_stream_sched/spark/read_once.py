"""Read once per micro-batch: the driver splits a batch's rows by task; each task reads its own.

Without this, every Spark task of a micro-batch read, hashed and split every row of the batch
and kept only its partition groups' rows (read amplification = ``numPartitions``). Tasks run in
separate Python worker processes, so they cannot share what one of them read. Instead
``partitions()`` (called on the driver, once per planned batch, replays included) reads the
rows between the batch's two offsets **once**, refuses (or drops) late rows of idle inputs, hashes
each row's key once and writes one Arrow IPC file per task, holding exactly that task's rows,
grouped by partition group (each group's rows in stream order, as ``GroupedBatch`` selects
them)::

    <stateLocation>/batches/<version>/task-0000.arrow     version = the end offset's state version

The task of a row is the task its partition group is assigned to: contiguous ranges of groups,
or under distributed adaptation the batch's recorded assignment
(``runtime/state/assignments.py``), so the split follows groups wherever they moved.

``read()`` (runs on executors) memory-maps its file. A task that finds no file (its batch was
planned before this layout, or the file was removed) falls back to reading the rows itself and
keeping its groups' rows, which gives the same rows.

Exactly-once and replays: the files are a pure function of the two offsets and the manifests'
files (the rows between the offsets, already fixed), written atomically (temporary file, then
rename) and rewritten whenever ``partitions()`` plans the batch again — after a driver restart
or a replay — so a task never reads rows of another plan. They are not state: nothing is lost
if they vanish, and no fsync is needed. ``commit(end)`` deletes the files of every version up to
``end``; ``stop()`` deletes them all.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime.keys import group_range_for_task
from spark_stream_sched.runtime.state.atomic import spill_error
from spark_stream_sched.runtime.state.group_store import IncrementalGroupStore
from spark_stream_sched.spark.offsets import Offset, version_id
from spark_stream_sched.spark.source_plan import SourcePlan, rows_between

#: Directory under ``stateLocation`` holding the per-task rows of planned batches.
SPILL_DIR = "batches"


@dataclass(frozen=True)
class SplitBatch:
    """What the driver learned while splitting one batch (shipped in each partition)."""

    paths: tuple[str, ...]
    rows_total: int
    late_dropped: int


def spill_root(location: str) -> str:
    """``<stateLocation>/batches``."""
    return os.path.join(location, SPILL_DIR)


def split_batch(plan: SourcePlan, files: tuple[tuple[str, ...], ...], start: Offset,
                end: Offset, n_tasks: int, task_of_group: Sequence[int] | None = None
                ) -> SplitBatch:
    """Read the batch's rows once and write each task's rows to its own Arrow IPC file.

    ``task_of_group[g]`` is the task of partition group ``g`` (None: contiguous ranges).
    Called on the driver by ``partitions()``. Late rows of formerly idle inputs are refused
    here with the runtime's error (``outOfOrder=fail``) or dropped (``drop``), once for the
    whole batch.
    """
    c = plan.config
    rows = rows_between(plan, files, start, end)
    kept = plan.batch(()).drop_late(rows, start.ready_bound())
    groups = group_ids(plan, kept).astype(np.int32)
    if task_of_group is None:
        task_of_group = [t for t, r in enumerate(_ranges(n_tasks, c.partition_groups)) for _ in r]
    # Stable sort by (task, group): each task's rows are contiguous, and within a task each
    # group's rows are one run in stream order (the per-group filters of GroupedBatch then
    # select runs, and each group's rows are the same as from the unsorted batch).
    task_of = np.asarray(task_of_group, np.int32)
    order = np.argsort(_rank_by_task(task_of)[groups], kind="stable")
    ends = np.searchsorted(task_of[groups[order]], np.arange(1, n_tasks + 1))
    by_group = kept.take(pa.array(order))
    directory = os.path.join(spill_root(c.state_location), version_id(end))
    paths, first = [], 0
    try:
        os.makedirs(directory, exist_ok=True)
        for index, stop in enumerate(ends.tolist()):
            path = os.path.join(directory, f"task-{index:04d}.arrow")
            _write_ipc(path, by_group.slice(first, stop - first))
            paths.append(path)
            first = stop
    except OSError as exc:  # a full disk: the plugin's error, naming the file
        raise spill_error(os.path.join(directory, f"task-{len(paths):04d}.arrow"), exc) from exc
    return SplitBatch(tuple(paths), rows.num_rows, rows.num_rows - kept.num_rows)


def _rank_by_task(task_of: np.ndarray) -> np.ndarray:
    """``rank[g]``: position of group ``g`` in the order ``(task, group)``.

    Sorting rows by their group's rank is sorting them by ``(task, group)``; the rank is below
    the number of groups, so it fits in ``uint16`` for up to 65,536 groups, where NumPy's stable
    sort is a radix sort (about 3.5x faster than on ``int32`` for 500 k rows here).
    """
    positions = np.argsort(task_of, kind="stable")  # ties (one task's groups) by group id
    rank = np.empty(len(task_of), np.int64)
    rank[positions] = np.arange(len(task_of))
    return rank.astype(np.uint16) if len(task_of) <= 1 << 16 else rank


def _ranges(n_tasks: int, n_groups: int) -> list[range]:
    return [group_range_for_task(task, n_tasks, n_groups) for task in range(n_tasks)]


def group_ids(plan: SourcePlan, rows: pa.Table) -> np.ndarray:
    """Partition group of each row, as ``GroupedBatch.group_ids`` computes it.

    The key hash is a function of each value alone, so with one key column each *distinct* key
    is hashed once (dictionary encoding) instead of every row; other keys hash every row.
    """
    keys = plan.config.spec.key_columns
    grouped = plan.batch(())
    if len(keys) != 1 or rows.num_rows == 0:
        return grouped.group_ids(rows)
    column = rows.column(keys[0]).combine_chunks()
    try:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return grouped.group_ids(rows)
    if pa.types.is_dictionary(column.type):
        return grouped.group_ids(rows)
    per_key = grouped.group_ids(pa.table({keys[0]: encoded.dictionary}))
    return np.asarray(per_key[encoded.indices.to_numpy()], np.int32)


def _write_ipc(path: str, table: pa.Table) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file, atomically (temporary + rename)."""
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        with pa.OSFile(temporary, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=1 << 20)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def read_task_rows(path: str) -> pa.Table | None:
    """The task's rows written by :func:`split_batch` (memory-mapped), or None if absent.

    Runs on executors.
    """
    try:
        source = pa.memory_map(path, "r")
    except FileNotFoundError:
        return None
    return pa.ipc.open_file(source).read_all()


def own_rows(plan: SourcePlan, groups: Sequence[int], rows: pa.Table) -> pa.Table:
    """The rows of ``groups`` among ``rows`` (the fallback when a task finds no file)."""
    group_of = plan.batch(()).group_ids(rows)
    return rows.filter(pa.array(np.isin(group_of, np.asarray(groups, np.int32))))


def prune(location: str, up_to: str | None) -> None:
    """Delete the per-task rows of every version ``<= up_to`` (all of them when None).

    Called on the driver by ``commit()`` and ``stop()``; a directory that cannot be removed is
    left for the next call.
    """
    root = spill_root(location)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        if up_to is None or name <= up_to:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)




class VersionStore(IncrementalGroupStore):
    """Group state of one streaming batch of task ``task``: version ``start`` in, ``end`` out.

    The :class:`~spark_stream_sched.runtime.query.batch.GroupStore` of ``read()`` (runs on
    executors): :class:`~spark_stream_sched.runtime.state.group_store.IncrementalGroupStore`
    (the worker's state cache, incremental files and manifests) named by the batch's offsets.
    """

    def __init__(self, location: str, start: Offset, end: Offset, task: int = 0,
                 cache_budget: int | None = None) -> None:
        initial = start == Offset.initial(len(start.cursors))
        super().__init__(location, None if initial else version_id(start), version_id(end),
                         task, cache_budget=cache_budget)
