"""The tasks of one micro-batch of the ``ordered-agg`` source: which groups each one runs.

``partitions(start, end)`` (driver) calls :func:`plan_tasks`, which

1. takes the batch's group -> task assignment: the one recorded for the batch's end version if
   there is one (a batch Spark replays after a driver crash runs exactly as first planned),
   else, with option ``adaptation`` on, the distribution manager's decision from the previous
   batch's recorded metrics (:func:`~spark_stream_sched.runtime.query.distribution.
   next_assignment`, seed 003 §5-§6), written durably *before* any task runs; with
   ``adaptation=none``, contiguous ranges of groups (nothing recorded);
2. clears manifests an earlier attempt of the same batch left in its version directory (the
   tasks about to run rewrite them, for the assignment above);
3. splits the batch's rows once by that assignment (``spark/read_once.py``) and returns one
   :class:`~.source_plan.GroupRangePartition` per task, carrying its groups and its pushes.

Everything here runs on the driver and is a function of the offsets and of files under
``stateLocation``: never of wall-clock time or of which executor ran what.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_stream_sched.runtime.query.distribution import initial_groups, next_assignment
from spark_stream_sched.runtime.query.group_load import can_spill
from spark_stream_sched.runtime.state import assignments, batch_metrics, manifests, versions
from spark_stream_sched.runtime.state.assignments import Assignment
from spark_stream_sched.spark import read_once
from spark_stream_sched.spark.offsets import Offset, version_id
from spark_stream_sched.spark.source_plan import GroupRangePartition, SourcePlan

log = logging.getLogger(__name__)


def batch_assignment(plan: SourcePlan, first: Offset, last: Offset) -> Assignment:
    """The group -> task assignment of the batch from ``first`` to ``last`` (module doc, 1)."""
    c = plan.config
    location, version = c.state_location, version_id(last)
    recorded = assignments.read_assignment(location, version)
    if recorded is not None:
        log.info("batch ending at %s: recorded assignment reused (%s)", version,
                 recorded.reason)
        return recorded
    n_tasks = min(c.num_partitions, c.partition_groups)
    if not c.adaptation.enabled:
        return Assignment(version, n_tasks, initial_groups(c.partition_groups, n_tasks),
                          reason="adaptation=none: contiguous ranges of groups")
    previous, parts = None, []
    if first != Offset.initial(len(first.cursors)):
        previous = assignments.read_assignment(location, version_id(first))
        parts = _parts(location, version_id(first))
    chosen = next_assignment(version, previous, parts, c.partition_groups, n_tasks,
                             c.adaptation, can_spill(c.spec))
    assignments.write_assignment(location, chosen)
    log.info("batch ending at %s: %s; moves %s, pushes %s", version, chosen.reason,
             list(chosen.moves), list(chosen.pushes))
    return chosen


def _parts(location: str, version: str) -> list[dict[str, Any]]:
    """The previous batch's task metrics ([] if unreadable: then nothing is adapted)."""
    try:
        return batch_metrics.read_parts(location, version)
    except (OSError, ValueError) as exc:
        log.warning("cannot read the metrics of version %s (%s): no adaptation at this batch",
                    version, exc)
        return []


def plan_tasks(plan: SourcePlan, start: dict[str, Any], end: dict[str, Any], first: Offset,
               last: Offset, files: tuple[tuple[str, ...], ...], skipped: int
               ) -> list[GroupRangePartition]:
    """One partition per task of the batch, by its assignment (module docstring, 1-3)."""
    chosen = batch_assignment(plan, first, last)
    manifests.remove_manifests(versions.version_dir(plan.config.state_location,
                                                    version_id(last)))
    split = read_once.split_batch(plan, files, first, last, chosen.tasks, chosen.groups)
    return [GroupRangePartition(i, chosen.groups_of(i), start, end, files, skipped,
                                split.paths[i], split.rows_total, split.late_dropped,
                                tuple(g for g in chosen.pushes if chosen.groups[g] == i))
            for i in range(chosen.tasks)]
