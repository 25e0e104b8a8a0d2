"""Query plans: operator definitions, the operator DAG, paths, segments, statistics, capacities.

Building a plan runs nothing; the scheduler and the executor read it. The vocabulary is that of
Jiang & Chakravarthy (2003), §2-§3 (operator path, segment, processing and memory release
capacities).
"""

from __future__ import annotations

from spark_stream_sched.runtime.plan.capacity import (
    chain_processing_capacity,
    operator_capacity,
    operator_memory_release_capacity,
    path_memory_release_capacity,
    path_processing_capacity,
    segment_memory_release_capacity,
)
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.io import load_plan, plan_from_dict
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind, QueueId
from spark_stream_sched.runtime.plan.paths import OperatorPath, operator_paths
from spark_stream_sched.runtime.plan.segments import Segment, build_segments, chain_priorities
from spark_stream_sched.runtime.plan.stats import OperatorStats, StatsTable

__all__ = [
    "OperatorDef",
    "OperatorKind",
    "OperatorPath",
    "OperatorStats",
    "QueryPlan",
    "QueueId",
    "Segment",
    "StatsTable",
    "build_segments",
    "chain_priorities",
    "chain_processing_capacity",
    "load_plan",
    "operator_capacity",
    "operator_memory_release_capacity",
    "operator_paths",
    "path_memory_release_capacity",
    "path_processing_capacity",
    "plan_from_dict",
    "segment_memory_release_capacity",
]
