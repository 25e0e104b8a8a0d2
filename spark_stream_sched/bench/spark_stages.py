"""Spark's own task metrics of one query, from the driver's REST API (``/api/v1/.../stages``).

A Python program sees no ``SparkListener`` events, and ``SparkContext.statusTracker()`` gives
stage ids and task counts but no metrics; the status REST API of the driver's web UI gives, per
stage, what the executors measured (Spark's monitoring guide, "REST API"). It is served only
when ``spark.ui.enabled`` is true: ``bench spark`` starts its sessions with :data:`SETTINGS`
(the UI on a free port of ``SPARK_LOCAL_IP``, loopback). In local mode and on a standalone
cluster alike, the figures are the executors' own, so they are the ones a cluster run can be
compared on (a cluster's executors are not processes of this machine's bench, see
:mod:`.spark_cpu`).

Stage ids only grow within an application, so a query's stages are those with an id above the
largest one seen before it started (:func:`last_stage`). Before reading, the listener bus is
drained (``LiveListenerBus.waitUntilEmpty``, reached through py4j): the status store is filled
by a listener, asynchronously, and the last stage of a query may not have been recorded when
the query returns.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

#: Settings of the sessions ``bench spark`` starts: the web UI, hence its REST API, on a free
#: port (it binds to ``SPARK_LOCAL_IP``, which the embedded session sets to 127.0.0.1).
SETTINGS: tuple[tuple[str, str], ...] = (("spark.ui.enabled", "true"), ("spark.ui.port", "0"))
#: Per-stage fields summed over a query (milliseconds, nanoseconds, bytes, records).
_SUMMED = ("executorRunTime", "executorDeserializeTime", "resultSerializationTime",
           "executorCpuTime", "shuffleWriteBytes", "shuffleReadBytes", "inputRecords",
           "numCompleteTasks")
Record = dict[str, Any]


def _stages(spark: Any) -> list[Record] | None:
    """Every stage the driver's status store keeps (None when the UI, hence REST, is off)."""
    context = spark.sparkContext
    url = context.uiWebUrl
    if not url:
        return None
    context._jsc.sc().listenerBus().waitUntilEmpty()
    endpoint = f"{url}/api/v1/applications/{context.applicationId}/stages"
    with urllib.request.urlopen(endpoint, timeout=30) as response:
        stages: list[Record] = json.loads(response.read())
    return stages


def last_stage(spark: Any) -> int | None:
    """The largest stage id so far (-1 before any; None when no REST API is served)."""
    stages = _stages(spark)
    if stages is None:
        return None
    return max((s["stageId"] for s in stages), default=-1)


def stage_totals(spark: Any, after: int | None) -> Record:
    """Summed metrics of the stages with an id above ``after`` (empty when ``after`` is None).

    Returns ``task_s`` (seconds the tasks held an executor core: deserialising, running and
    serialising their results, Python workers' time included, as the executor measured it),
    ``task_jvm_cpu_s`` (CPU of the JVM task threads, without the Python workers),
    ``shuffle_write_bytes``, ``shuffle_read_bytes``, ``input_records``, ``tasks`` and
    ``stages`` (every attempt counted).
    """
    stages = _stages(spark) if after is not None else None
    if stages is None:
        return {}
    sums = dict.fromkeys(_SUMMED, 0)
    ours = [s for s in stages if s["stageId"] > after]
    for stage in ours:
        for name in _SUMMED:
            sums[name] += stage.get(name) or 0
    millis = (sums["executorRunTime"] + sums["executorDeserializeTime"]
              + sums["resultSerializationTime"])
    return {"task_s": round(millis / 1000, 3),
            "task_jvm_cpu_s": round(sums["executorCpuTime"] / 1e9, 3),
            "shuffle_write_bytes": sums["shuffleWriteBytes"],
            "shuffle_read_bytes": sums["shuffleReadBytes"],
            "input_records": sums["inputRecords"], "tasks": sums["numCompleteTasks"],
            "stages": len(ours)}


def executor_cores(spark: Any) -> int:
    """Cores of the active executors (the driver's entry excluded), from the REST API."""
    context = spark.sparkContext
    endpoint = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/executors"
    with urllib.request.urlopen(endpoint, timeout=30) as response:
        executors: list[Record] = json.loads(response.read())
    return sum(e.get("totalCores", 0) for e in executors if e.get("id") != "driver")
