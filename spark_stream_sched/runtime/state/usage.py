"""What a running query holds: a process's resident memory and a state location's size (no pyspark).

A query meant to run for weeks must hold as much after a million batches as after a thousand.
The source's batch metrics and the sink's commit markers therefore carry, for every batch, the
resident set size of the driver-side process and of the busiest Python worker, and the files
and bytes under the state location (docs/state_store.md, "Retention"), so that
``spark-stream-sched report`` can show them flat -- or show a leak.

RSS is read from ``/proc/<pid>/statm`` (Linux); elsewhere it is None and the figure is left
out. The location is walked after its pruning, so its size is what the retention rules keep.
"""

from __future__ import annotations

import os

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_rss(pid: int | None = None) -> int | None:
    """Resident set size of process ``pid`` (default: this one) in bytes; None if unknown."""
    try:
        with open(f"/proc/{pid or os.getpid()}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def tree_size(root: str) -> tuple[int, int]:
    """``(files, bytes)`` under ``root`` (0, 0 when it does not exist).

    Files that vanish while the tree is walked (a concurrent prune) are skipped.
    """
    files = size = 0
    for directory, _, names in os.walk(root):
        for name in names:
            try:
                size += os.stat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                continue
            files += 1
    return files, size


def location_figures(location: str) -> dict[str, int]:
    """``location_files`` and ``location_bytes`` of a state location, for the metrics."""
    files, size = tree_size(location)
    return {"location_files": files, "location_bytes": size}


def rss_figure(name: str) -> dict[str, int]:
    """``{name: this process's RSS}``, or ``{}`` where RSS cannot be read."""
    rss = process_rss()
    return {} if rss is None else {name: rss}
