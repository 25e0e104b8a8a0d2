"""Per-batch metrics files of the ``ordered-agg`` source under ``stateLocation`` (no pyspark).

pyspark's Python streaming source API has no channel into ``StreamingQueryProgress`` (a Python
``DataSourceStreamReader`` cannot implement ``ReportsSourceMetrics``), so the source writes its
figures here, where ``spark_stream_sched.spark.metrics.OrderedAggProgress`` (a
``StreamingQueryListener``) and ``spark-stream-sched report`` read them::

    <stateLocation>/metrics/
      parts/<version>/part-0003.json   one per read(): what partition 3 of the batch that ends
                                       at state version <version> did
      batch-000000000042.json          the whole batch 42 (Spark's batch id), merged on the
                                       driver by commit() — or by the listener if it asks first
                                       (Spark commits batch n when it plans batch n + 1)

Every file is written by :func:`~spark_stream_sched.runtime.state.atomic.atomic_write`, so a
reader never sees half a file and a replayed batch simply rewrites its parts. The newest
``keepMetrics`` batch files are kept (default :data:`KEEP_BATCHES`); part directories are
deleted once merged and older than the committed version. Merging is deterministic, so whoever
merges first writes the same file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from collections.abc import Sequence
from typing import Any

from spark_stream_sched.runtime.state.atomic import atomic_write

#: Batch files kept by default (option ``keepMetrics``; about 1-2 KB each); older ones are
#: deleted when a batch is committed.
KEEP_BATCHES = 1000
METRICS_DIR = "metrics"
_BATCH_FILE = re.compile(r"^batch-(\d{12})\.json$")
#: Figures that are the same in every part (each task reads all of the batch's rows).
_SHARED = ("rows_read", "late_dropped", "ready_bound", "newest_ts", "lag_ms",
           "late_files_skipped")
#: Figures of each task's process: the batch's is the largest.
_PEAK = ("worker_rss_bytes",)
#: Figures that add up over the parts (each task owns its partition groups).
_SUMMED = ("rows_of_partition", "rows_released", "rows_pending", "windows_out", "state_bytes",
           "groups", "state_files_written", "state_files_unchanged", "state_bytes_written",
           "state_cache_hits", "state_cache_misses", "join_pushes", "join_pushed_bytes",
           "join_held_pushed_bytes", "join_cleanups", "join_cleanup_results")
#: Seconds that add up over the parts (a join's clean-up time in each task).
_SUMMED_SECONDS = ("join_cleanup_seconds",)


def metrics_dir(location: str) -> str:
    """Directory of the metrics files of the query under ``location``."""
    return os.path.join(location, METRICS_DIR)


def part_path(location: str, version: str, index: int) -> str:
    """File of partition ``index`` of the batch ending at state ``version``."""
    return os.path.join(metrics_dir(location), "parts", version, f"part-{index:04d}.json")


def batch_path(location: str, batch_id: int) -> str:
    """Merged file of batch ``batch_id``."""
    return os.path.join(metrics_dir(location), f"batch-{batch_id:012d}.json")


def worker_identity() -> str:
    """``host:pid:cwd`` of the process running a task (metric ``worker``).

    On a standalone cluster a Python worker runs in its executor's directory
    (``<work>/<app id>/<executor id>``), so the last part tells executors apart.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{os.getcwd()}"


def write_part(location: str, version: str, index: int, metrics: dict[str, Any]) -> None:
    """Write one partition's metrics (called by ``read()`` on an executor)."""
    data = json.dumps(metrics, sort_keys=True, default=str).encode()
    atomic_write(part_path(location, version, index), data)


def read_parts(location: str, version: str) -> list[dict[str, Any]]:
    """The partition files of ``version`` in partition order ([] when there are none)."""
    directory = os.path.dirname(part_path(location, version, 0))
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    return [_load(os.path.join(directory, n)) for n in names]


def merge_parts(parts: Sequence[dict[str, Any]], version: str, batch_id: int) -> dict[str, Any]:
    """One batch's figures from its partitions' (see the module doc for which add up)."""
    merged: dict[str, Any] = {"batch_id": batch_id, "version": version, "partitions": len(parts)}
    for key in _SHARED:
        merged[key] = max((p[key] for p in parts if p.get(key) is not None), default=None)
    for key in _SUMMED:
        merged[key] = sum(int(p.get(key) or 0) for p in parts)
    for key in _PEAK:
        merged[key] = max((int(p[key]) for p in parts if p.get(key)), default=None)
    for key in _SUMMED_SECONDS:
        merged[key] = sum(float(p.get(key) or 0.0) for p in parts)
    merged["seconds"] = max(float(p.get("seconds") or 0.0) for p in parts)
    for key, pick in (("started_at", min), ("ended_at", max)):
        times = [float(p[key]) for p in parts if p.get(key) is not None]
        if times:
            merged[key] = pick(times)
    _merge_groups(parts, merged)
    executors = [p["executor"] for p in parts if p.get("executor")]
    if executors:
        merged["executor"] = _merge_executor(executors)
    return merged


def _merge_groups(parts: Sequence[dict[str, Any]], merged: dict[str, Any]) -> None:
    """Per-group figures of distributed adaptation (Liu & Rundensteiner 2005, §5), if any.

    ``group_loads`` (group -> ``[P_s bytes, results, spilled]``, the distribution manager's
    input for the next batch), ``assignment`` (task -> the groups it ran), ``workers`` (task ->
    :func:`worker_identity`) and ``pushed_groups`` (groups pushed to disk at the batch's start).
    """
    if not any("group_loads" in p for p in parts):
        return
    loads: dict[str, Any] = {}
    assignment: dict[str, list[int]] = {}
    workers: dict[str, str] = {}
    for index, part in enumerate(parts):
        mine = part.get("group_loads") or {}
        loads.update(mine)
        task = str(part.get("task", index))
        assignment[task] = sorted(int(g) for g in mine)
        workers[task] = str(part.get("worker", ""))
    merged["group_loads"] = {g: loads[g] for g in sorted(loads, key=int)}
    merged["assignment"] = assignment
    merged["workers"] = workers
    merged["pushed_groups"] = sorted(g for p in parts for g in p.get("pushed_groups") or ())


def _merge_executor(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Executor figures over the tasks: counts add up, queue peaks and latencies take the max."""
    out: dict[str, Any] = {}
    for p in progress:
        for key, value in p.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                out.setdefault(key, value)
            elif key.startswith(("peak_", "latency_", "elapsed")):
                out[key] = max(out.get(key, value), value)
            else:
                out[key] = out.get(key, 0) + value
    return out


def merge_batch(location: str, version: str, batch_id: int | None = None,
                driver: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Merge the parts of ``version`` into its batch file; None when it has no parts.

    The batch id is Spark's, recorded by the tasks; ``batch_id`` is used only when they had
    none (no Spark task context: tests), and by default is one past the newest batch file.
    ``driver``: figures the driver adds (its RSS, the location's size at the commit).
    """
    parts = read_parts(location, version)
    if not parts:
        return None
    ids = [p["batch_id"] for p in parts if p.get("batch_id") is not None]
    if ids:
        batch_id = int(ids[0])
    elif batch_id is None:
        batch_id = max(batch_ids(location), default=-1) + 1
    merged = {**merge_parts(parts, version, batch_id), **(driver or {})}
    atomic_write(batch_path(location, batch_id), json.dumps(merged, sort_keys=True).encode())
    return merged


def batch_ids(location: str) -> list[int]:
    """Ids of the merged batch files, ascending."""
    try:
        names = os.listdir(metrics_dir(location))
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m)


def read_batch(location: str, batch_id: int) -> dict[str, Any] | None:
    """The merged figures of one batch, or None when its file does not exist (yet)."""
    try:
        return _load(batch_path(location, batch_id))
    except FileNotFoundError:
        return None


def read_batches(location: str, unmerged: bool = True) -> list[dict[str, Any]]:
    """Every kept batch's figures in batch order.

    With ``unmerged``, batches whose parts no ``commit()`` merged yet are merged in memory
    (nothing is written): Spark commits a batch's source offsets only when it plans the next
    batch, so the last batch of a ``Trigger.AvailableNow`` run stays unmerged until the query
    runs again.
    """
    found = [b for i in batch_ids(location) if (b := read_batch(location, i)) is not None]
    if unmerged:
        merged = {b["version"] for b in found}
        for version in _part_versions(location):
            parts = read_parts(location, version) if version not in merged else []
            if parts:
                ids = [p["batch_id"] for p in parts if p.get("batch_id") is not None]
                batch_id = int(ids[0]) if ids else max(
                    [b["batch_id"] for b in found], default=-1) + 1
                found.append(merge_parts(parts, version, batch_id))
    return sorted(found, key=lambda b: (b["batch_id"], b["version"]))


def _part_versions(location: str) -> list[str]:
    """Versions that have a part directory, ascending (= batch order)."""
    try:
        return sorted(os.listdir(os.path.join(metrics_dir(location), "parts")))
    except FileNotFoundError:
        return []


def prune(location: str, committed: str, keep: int = KEEP_BATCHES) -> int:
    """Delete part directories older than ``committed`` and all but the ``keep`` newest batches.

    Returns the number of entries deleted. Called on the driver from ``commit()``.
    """
    parts_root = os.path.join(metrics_dir(location), "parts")
    old = [n for n in _part_versions(location) if n < committed]
    for name in old:
        shutil.rmtree(os.path.join(parts_root, name), ignore_errors=True)
    ids = batch_ids(location)
    doomed = ids[: max(0, len(ids) - keep)]
    for batch_id in doomed:
        os.unlink(batch_path(location, batch_id))
    return len(old) + len(doomed)


def _load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        loaded: dict[str, Any] = json.load(fh)
    return loaded
