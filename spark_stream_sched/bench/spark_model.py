"""How ``bench spark``'s engines would scale with executor cores, projected from measurements.

A 2-core machine cannot show 64 cores, but it can measure what scales and what does not.
Amdahl's law (G. M. Amdahl, *Validity of the single processor approach to achieving large
scale computing capabilities*, AFIPS 1967) splits a run into a serial part ``S`` and a part
``P`` that ``n`` cores share::

    T(n) = S + P / min(n, cap)          throughput(n) = rows / T(n)

with inputs measured on the engine's ``local[1]`` run (the cores case, :mod:`.spark_scaling`):

* ``P``, ``tasks s``: the seconds the query's tasks held the one executor core, as Spark's
  executors measured them (run time, deserialisation and result serialisation;
  :mod:`.spark_stages`), Python workers' time included;
* ``S``, ``serial s``: the run's wall time less ``P``. With one core the tasks run one at a
  time, so the rest is the driver's: planning and committing every micro-batch, starting and
  stopping the query, scheduling, and what an engine itself runs on the driver;
* ``cap``: the most tasks one stage of the engine can use. Ours give every partition group to
  one task (16 groups unless ``partitionGroups`` says otherwise); Spark's own engines split by
  key and file, which this workload has plenty of (no cap).

Printed beside them, and not used by the projection: task and driver CPU per million rows and
per micro-batch (``/proc``, :mod:`.spark_cpu`: how much of ``S`` is CPU rather than waiting)
and the shuffle bytes written per input row. The model is checked where this machine can
measure: on ``local[2]`` and on a standalone cluster (``--cluster``).

What it assumes, and ignores:

* every stage splits into at least ``min(n, cap)`` tasks of equal size: a deployment on ``n``
  cores sets ``spark.sql.shuffle.partitions`` (and the source's ``numPartitions``) to ``n``,
  where the measured runs use 2; no skew, no stragglers;
* the per-task fixed cost (scheduling, deserialising, a Python worker's round trip) does not
  grow with the number of tasks, and the per-batch fixed cost of the driver does not grow with
  the number of executors (it does: more tasks to plan, schedule and commit);
* no network: on a cluster the shuffle bytes cross it (bytes per row are printed), here they
  stay on one disk;
* a task's time on ``local[1]`` is what it takes on a core of its own, though on this 2-core
  machine the second core runs the garbage collector, the JIT and a Python worker alongside
  the JVM task thread that feeds it (``task CPU`` above ``tasks s`` shows it); on ``local[2]``
  and the cluster point the driver competes with the tasks for the same two cores, which a
  real cluster does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_stream_sched.runtime.query.spec import DEFAULT_PARTITION_GROUPS

Record = dict[str, Any]
#: Core counts the projection is printed for (``--project-cores``).
PROJECT_CORES = (4, 16, 64)
#: Tasks one stage can use, per engine (absent: no cap). Ours give each group to one task.
CAPS = {engine: DEFAULT_PARTITION_GROUPS for engine in (
    "ordered-agg", "ordered-agg-driver", "transform", "ordered-agg-sink",
    "ordered-agg-sink-unpartitioned")}


def model_inputs(one_core: Record) -> Record | None:
    """The model's inputs from an engine's ``local[1]`` summary (None without task metrics)."""
    if "task_s" not in one_core:
        return None
    rows, batches = one_core["rows"], max(1, one_core["micro_batches"])
    serial, per_m = one_core["outside_tasks_s"], 1e6 / rows
    return {"engine": one_core["engine"], "rows": rows, "batches": batches,
            "one_core_s": one_core["seconds_median"], "task_s": one_core["task_s"],
            "serial_s": serial, "serial_per_batch_s": round(serial / batches, 3),
            "serial_per_m_rows_s": round(serial * per_m, 3),
            "task_cpu_per_m_rows_s": round(one_core["task_cpu_s"] * per_m, 3),
            "driver_cpu_per_batch_s": round(one_core["driver_cpu_s"] / batches, 3),
            "driver_cpu_per_m_rows_s": round(one_core["driver_cpu_s"] * per_m, 3),
            "shuffle_bytes_per_row": one_core["shuffle_bytes_per_row"],
            "cap": CAPS.get(one_core["engine"])}


def projected_seconds(inputs: Record, cores: int) -> float:
    """``T(n) = S + P / min(n, cap)`` (module doc); a negative ``S`` counts as 0."""
    cap = int(inputs["cap"] or cores)
    return max(0.0, float(inputs["serial_s"])) + float(inputs["task_s"]) / min(cores, cap)


def projected_rate(inputs: Record, cores: int) -> int:
    """Projected rows per second on ``cores`` executor cores."""
    return round(int(inputs["rows"]) / projected_seconds(inputs, cores))


def model_rows(results: Sequence[Record], project: Sequence[int] = PROJECT_CORES) -> list[Record]:
    """The model's rows (case ``model``) and its checks against measured points (``check``).

    ``results``: the cores case (its ``local[1]`` rows give the inputs) and the cluster case.
    A check row compares a measured run on more than one core (``local[2]``, the cluster) with
    the projection for its core count: ``measured / model`` of the rows per second.
    """
    inputs = {r["engine"]: i for r in results if r.get("case") == "cores" and r["cores"] == 1
              and (i := model_inputs(r)) is not None}
    rows: list[Record] = []
    for model in inputs.values():
        rates = {f"model_rows_per_s_{n}": projected_rate(model, n) for n in project}
        rows.append({"bench": "spark", "case": "model", **model, **rates,
                     "project_cores": list(project)})
    for r in results:
        found = inputs.get(r["engine"])
        if found is None or r.get("case") not in ("cores", "cluster") or r["cores"] < 2:
            continue
        model = found
        expected = projected_rate(model, r["cores"])
        rows.append({"bench": "spark", "case": "check", "engine": r["engine"],
                     "master": r["master"], "cores": r["cores"], "rows": r["rows"],
                     "measured_s": r["seconds_median"],
                     "model_s": round(projected_seconds(model, r["cores"]), 3),
                     "measured_rows_per_s": r["rows_per_s_median"],
                     "model_rows_per_s": expected,
                     "measured_over_model": round(r["rows_per_s_median"] / expected, 2),
                     "matches_truth": r["matches_truth"]})
    return rows
