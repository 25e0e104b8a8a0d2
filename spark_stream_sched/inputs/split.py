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
(``runtime/distribution/assignments.py``), so the split follows groups wherever they moved.

``read()`` (runs on executors) memory-maps its file. A task that finds no file (option
``splitRows=tasks``, a batch planned before this layout, or a file removed) reads the batch's
rows itself and keeps its groups' rows, which gives the same rows: every task then reads the
whole batch (read amplification = ``numPartitions``) and the driver decodes no column but the
timestamps its admission reads.

Exactly-once and replays: the files are a pure function of the two offsets and the manifests'
files (the rows between the offsets, already fixed), written atomically (temporary file, then
rename) and rewritten whenever ``partitions()`` plans the batch again — after a driver restart
or a replay — so a task never reads rows of another plan. They are not state: nothing is lost
if they vanish, and no fsync is needed.

Deleted by the driver (:class:`~spark_stream_sched.inputs.driver.SourceDriver`), never by
``stop()``: Spark ends the source runner's process when a query stops without calling the
reader's ``stop()``, and commits a batch's offsets to the source only when it plans the next
batch, so the last batch of a ``Trigger.AvailableNow`` run is never committed. Instead
``latestOffset(start)`` deletes the files of every version up to ``start`` (Spark plans the
next batch only after the batch ending at ``start`` ran), so a run that ends leaves none; the
first driver call of a run deletes every file an earlier run left (a crash), since every batch
is planned again before it runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_stream_sched.inputs.offsets import Offset, version_id
from spark_stream_sched.inputs.plan import SourcePlan, rows_between
from spark_stream_sched.runtime.distribution.groups import (
    group_of_rows,
    initial_groups,
    radix_key,
)
from spark_stream_sched.runtime.engine.batch import drop_late
from spark_stream_sched.runtime.state.atomic import spill_error, temp_path

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
    here with the engine's error (``outOfOrder=fail``) or dropped (``drop``), once for the
    whole batch.
    """
    c = plan.config
    rows = rows_between(plan, files, start, end)
    kept = drop_late(rows, start.ready_bound(), c.spec, plan.batch(()).late)
    groups = group_of_rows(kept, c.spec.key_columns, c.partition_groups)
    if task_of_group is None:
        task_of_group = initial_groups(c.partition_groups, n_tasks)
    # Stable sort by (task, group): each task's rows are contiguous, and within a task each
    # group's rows are one run in stream order (each group's rows are then the same as from the
    # unsorted batch).
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
    return radix_key(rank)


def _write_ipc(path: str, table: pa.Table) -> None:
    """Write ``table`` as an uncompressed Arrow IPC file, atomically (temporary + rename)."""
    temporary = temp_path(path)
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


def prune(location: str, up_to: str | None) -> None:
    """Delete the per-task rows of every version ``<= up_to`` (all of them when None).

    Called on the driver by ``latestOffset()``, ``commit()`` and at the start of a run; a
    directory that cannot be removed is left for the next call.
    """
    root = spill_root(location)
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    for name in names:
        if up_to is None or name <= up_to:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
