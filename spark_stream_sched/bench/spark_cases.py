"""One ``bench spark`` case: every engine on one workload, repeated, then summarised.

The engines run in rounds, every engine once per round, so a busy spell of the shared machine
hits all of them: ``warmup`` rounds that are not timed (the first query of a kind in a JVM
starts its Python workers and runs uncompiled code: without a warm-up, the first of three
rounds took 1.7-3.4x the third on the 2 M-row workload), then ``runs`` timed rounds with
batching A, then one round with batching B (not the floors: they replay the source's
batching-A micro-batches). Reported per engine:

* the median wall time of the timed runs, and its ratios to native's and native-minby's
  medians (``native/this``, ``minby/this``) and to the floors' medians (``x floor``, ``x empty
  floor``);
* whether every run's output (warm-up and B included) equals the truth
  (:func:`~.spark_data.matches`), whether every row it emitted does
  (:func:`~.spark_data.emitted_match`: native's append mode leaves the last windows open, so
  only this can hold for it) and how many windows it left open, whether the batching-A runs
  gave identical rows, and batching B the same rows as A;
* the CPU time of Spark's processes by role (:mod:`.spark_cpu`), as a mean per timed run, and for
  the sink what its commit markers count (:func:`sink_counters`);
* Spark's own task metrics (:mod:`.spark_stages`, :func:`stage_summary`): the seconds the
  tasks held executor cores, the wall time outside them, the shuffle bytes per input row.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_stream_sched.bench.spark_cpu import JVM_PARTS, ROLES, measure
from spark_stream_sched.bench.spark_data import (
    SOURCE_SPLIT_ROWS,
    Output,
    Truth,
    Workload,
    differing,
    emitted_match,
    first_differs,
    matches,
    prepare_data,
    result_rows,
    source_options,
    truth_of,
    truth_scores,
    with_end_rows,
)
from spark_stream_sched.bench.spark_floor import (
    FLOORS,
    NO_OUTPUT,
    PACKED_FLOORS,
    SOURCE_FLOORS,
    Floor,
    batches_run,
    prepare_floor,
)
from spark_stream_sched.bench.spark_native import unavailable

logger = logging.getLogger(__name__)

Record = dict[str, Any]
#: Every engine, in the order of the tables.
ENGINES = ("native", "native-minby", "ordered-agg", "ordered-agg-driver", "transform",
           "transform-keyed", "ordered-agg-sink", "ordered-agg-sink-unpartitioned", *FLOORS)
#: The do-nothing floor of each transformation's operator, ``applyInPandasWithState`` (same
#: packed input).
OPERATOR_FLOORS = {"transform": "floor-apply-in-pandas-with-state",
                   "transform-keyed": "floor-apply-in-pandas-with-state-keyed"}
#: ``(engine, workload, output directory, files per input per batch, floor) -> record``.
RunEngine = Callable[[str, Workload, Path, int, Floor | None], Record]


@dataclass(frozen=True)
class Case:
    """Engines to run on one workload, how often, and with which batchings.

    ``batchings``: files per input per micro-batch of runs A and B; None gives the source its
    default ``Trigger.AvailableNow`` sizing and skips B. ``warmup``: untimed rounds first
    (batching A, tagged ``W``).
    """

    name: str
    root: Path
    engines: tuple[str, ...]
    runs: int
    batchings: tuple[int, int] | None
    warmup: int = 0

    def plan(self) -> list[tuple[str, int, str]]:
        """``(engine, run, batching)`` in the order they run (batching ``W``: warm-up)."""
        plan = [(engine, i, "W") for i in range(self.warmup) for engine in self.engines]
        plan += [(engine, i, "A") for i in range(self.runs) for engine in self.engines]
        if self.batchings is not None:
            plan += [(engine, self.runs, "B") for engine in self.engines if engine not in FLOORS]
        return plan

    def files(self, batching: str) -> int:
        """Files per input per micro-batch of ``batching`` (0: the source's default sizing)."""
        if self.batchings is None:
            return 0
        return self.batchings[1] if batching == "B" else self.batchings[0]


def prepare(case: Case, rows: int, n_inputs: int, keys: int, seed: int, size: str, slide: str,
            watermark: str, partitions: int | None = None) -> tuple[Workload, Truth, str]:
    """Write the case's inputs; return the workload, the truth and what computed it.

    ``partitions``: the source's ``numPartitions`` (None: its default).
    """
    from spark_stream_sched.runtime.window.spec import parse_duration

    dirs, tables = prepare_data(case.root, rows, n_inputs, keys, seed)
    end_dirs = (with_end_rows(dirs, case.root / "transform-input")
                if {*OPERATOR_FLOORS, *PACKED_FLOORS} & set(case.engines) else [])
    truth, oracle = truth_of(tables, parse_duration(size, "window"),
                             parse_duration(slide, "slide"))
    work = Workload(tuple(map(str, dirs)), tuple(map(str, end_dirs)), rows, keys, size, slide,
                    watermark, partitions)
    return work, truth, oracle


def measured_run(run: Callable[[], Record], out: Path) -> Record:
    """Run one query while sampling Spark's processes; add micro-batches and the load."""
    with measure() as cpu:
        record = run()
    return {**record, "cpu": cpu.by_role(), "cpu_wall_s": round(cpu.wall_s, 3),
            "micro_batches": batches_run(out),
            "load_1m": round(os.getloadavg()[0], 2)}


def run_case(case: Case, work: Workload, truth: Truth, oracle: str, run_engine: RunEngine,
             bar: Any) -> list[Record]:
    """Run :meth:`Case.plan` and summarise each engine (module doc); ``bar``: a tqdm bar.

    An engine the installed Spark cannot run (:func:`~.spark_native.unavailable`) is not run:
    its row says ``available: False`` and the one-line ``unavailable`` reason.
    """
    missing = {engine: reason for engine in case.engines
               if (reason := unavailable(engine)) is not None}
    floor = None
    if any(engine in SOURCE_FLOORS for engine in case.engines):
        limit = work.max_records(case.files("A")) if case.batchings else None
        floor = prepare_floor(source_options(work, limit), case.root / "floor")
    records: dict[str, list[Record]] = {engine: [] for engine in case.engines}
    outputs: dict[tuple[str, str], list[Output]] = {}
    for engine, i, batching in case.plan():
        if engine in missing:
            bar.update(1)
            continue
        tag = f"{engine}-{batching}-{i}"
        out = case.root / tag
        bar.set_description(f"bench spark {case.name} {tag}")
        logger.info("bench spark %s: %s", case.name, tag)
        record = measured_run(functools.partial(run_engine, engine, work, out,
                                                case.files(batching), floor), out)
        if batching == "A":
            records[engine].append(record)
        same_rows = "B" if batching == "B" else "A"  # a warm-up run has batching A
        outputs.setdefault((engine, same_rows), []).append(result_rows(out))
        shutil.rmtree(out / "state", ignore_errors=True)
        bar.update(1)
    results = [{"bench": "spark", "case": case.name, "engine": engine, "rows": work.rows,
                "available": False, "unavailable": missing[engine]} if engine in missing
               else summarise(case, engine, work, records[engine], outputs[(engine, "A")],
                              outputs.get((engine, "B"), [None])[0], truth, oracle)
               for engine in case.engines]
    return with_ratios(results)


def summarise(case: Case, engine: str, work: Workload, records: Sequence[Record],
              runs_a: Sequence[Output], run_b: Output | None, truth: Truth,
              oracle: str) -> Record:
    """One engine's row of the results (module doc)."""
    seconds = [r["seconds"] for r in records]
    first = runs_a[0]
    between_runs = max((differing(first, other) for other in runs_a[1:]), default=0)
    # Share of windows whose first() differs between any two runs of the same batching.
    unstable = sum(1 for k in first if len({r.get(k, (None,) * 3)[2] for r in runs_a}) > 1)
    every_run = [*runs_a, *([run_b] if run_b is not None else [])]
    return {
        "bench": "spark", "case": case.name, "engine": engine, "rows": work.rows,
        "inputs": work.n_inputs, "keys": work.keys, "window": work.size, "slide": work.slide,
        "watermark": work.watermark if engine == "native" else None,
        "batching_a": case.files("A"), "batching_b": case.files("B"), "runs": len(seconds),
        "warmup": case.warmup,
        "seconds": [round(s, 2) for s in seconds],
        "seconds_median": round(statistics.median(seconds), 3),
        "rows_per_s_best": round(work.rows / min(seconds)),
        "rows_per_s_median": round(work.rows / statistics.median(seconds)),
        "micro_batches": records[-1]["micro_batches"],
        "load_1m": [r["load_1m"] for r in records],
        # floor-empty and the input floors yield nothing by design: no output to compare
        "matches_truth": None if engine in NO_OUTPUT else all(
            matches(rows, truth) for rows in every_run),
        "emitted_match_truth": None if engine in NO_OUTPUT else all(
            emitted_match(rows, truth) for rows in every_run),
        "identical_over_runs": between_runs == 0, "rows_differing_over_runs": between_runs,
        "first_differs_over_runs_pct": round(100.0 * unstable / len(first), 2)
        if first else None,
        "identical_across_batchings": None if run_b is None else differing(first, run_b) == 0,
        "first_differs_across_batchings_pct": None if run_b is None
        else first_differs(first, run_b),
        "rows_differing_across_batchings": None if run_b is None else differing(first, run_b),
        **({"rows_read": [r["rows_read"] for r in records]} if "rows_read" in records[0]
           else {}),
        "oracle": oracle, **truth_scores(first, truth), **cpu_by_role(records),
        **sink_counters(records), **stage_summary(records, work.rows),
    }


def cpu_by_role(records: Sequence[Record]) -> Record:
    """Mean CPU seconds per run of each role and in all, and the driver's share of Python's.

    ``proc_driver_share_pct`` = driver-side Python (``commit`` + ``driver``) / all Python
    (``commit`` + ``driver`` + ``tasks``), from ``/proc`` (:mod:`.spark_cpu`).
    ``task_cpu_s`` = the tasks' Python workers + the JVM's task threads; ``driver_cpu_s`` = the
    driver's Python processes (``commit`` + ``driver``) + the JVM's driver threads (in local
    mode; on a cluster the executors are not this machine's processes and only the driver's
    side is seen).
    """
    def mean(role: str) -> float:
        return round(sum(float(r["cpu"].get(role, 0.0)) for r in records) / len(records), 3)

    out: Record = {f"cpu_{role}_s": mean(role) for role in (*ROLES, *JVM_PARTS)}
    out["cpu_total_s"] = round(sum(out[f"cpu_{role}_s"] for role in ROLES), 3)
    driver = out["cpu_commit_s"] + out["cpu_driver_s"]
    python = driver + out["cpu_tasks_s"]
    # below that, the Python CPU is sampling noise (native runs no Python)
    out["proc_driver_share_pct"] = round(100.0 * driver / python, 1) if python > 0.05 else None
    out["task_cpu_s"] = round(out["cpu_tasks_s"] + out["cpu_jvm_tasks_s"], 3)
    out["driver_cpu_s"] = round(driver + out["cpu_jvm_driver_s"], 3)
    return out


def stage_summary(records: Sequence[Record], rows: int, cores: int | None = None) -> Record:
    """Medians over the runs of Spark's task metrics (:func:`.spark_stages.stage_totals`).

    ``task_s``: seconds the query's tasks held an executor core; ``outside_tasks_s`` (one
    executor ``cores`` only, where tasks run one at a time): wall time less that, the serial
    part of the run; ``shuffle_bytes_per_row``: shuffle bytes written per input row; ``tasks``:
    tasks run. Empty when a run has no metrics (a session without the REST API).
    """
    runs = [r.get("stages") or {} for r in records]
    if not runs or not all(runs):
        return {}

    def median(values: Sequence[float]) -> float:
        return round(statistics.median(values), 3)

    return {"task_s": median([s["task_s"] for s in runs]),
            "task_jvm_cpu_s": median([s["task_jvm_cpu_s"] for s in runs]),
            "outside_tasks_s": median([r["seconds"] - s["task_s"]
                                       for r, s in zip(records, runs, strict=True)])
            if cores == 1 else None,
            "shuffle_bytes_per_row": round(median([s["shuffle_write_bytes"] for s in runs])
                                           / rows, 2),
            "tasks": round(median([s["tasks"] for s in runs]))}


def sink_counters(records: Sequence[Record]) -> Record:
    """What the sink's commit markers say, as a mean per run (empty for other engines).

    ``sink_driver_cpu_s`` sums the markers' ``driver_cpu_s`` (CPU of the process running the
    commit, for the whole commit), ``sink_tasks_cpu_s`` their ``tasks_cpu_s`` (CPU of the
    write tasks' per-group work); ``sink_driver_share_pct`` = driver / (driver + tasks).
    ``finish_sink`` writes a marker without CPU counters; its CPU in the bench process is
    ``finish_cpu_s``.
    """
    markers = [m for r in records for m in r.get("markers", []) if "driver_cpu_s" in m]
    if not markers:
        return {}
    runs = len(records)
    driver = sum(m["driver_cpu_s"] for m in markers)
    tasks = sum(m.get("tasks_cpu_s") or 0.0 for m in markers)
    return {"sink_driver_cpu_s": round(driver / runs, 3),
            "sink_tasks_cpu_s": round(tasks / runs, 3),
            "sink_driver_share_pct": round(100.0 * driver / (driver + tasks), 1)
            if driver + tasks else None,
            "groups_on_driver": round(sum(m.get("groups_on_driver", 0) for m in markers) / runs),
            "rows_on_driver": round(sum(m.get("rows_on_driver", 0) for m in markers) / runs),
            "groups_caught_up": round(sum(m.get("groups_caught_up", 0) for m in markers) / runs),
            "finish_cpu_s": round(sum(r["finish_cpu_s"] for r in records) / runs, 3)}


def with_ratios(results: list[Record]) -> list[Record]:
    """Add each engine's median over native's and the floors' medians of the same case.

    ``x_op_floor``: a transformation's median over its :data:`OPERATOR_FLOORS` floor's.

    CPU, the primary measure (wall time on shared cores spreads too much to compare): where a
    record has ``cpu_total_s`` (all processes, mean per run), ``cpu_per_m_rows_s`` is that per
    million input rows and ``cpu_x_native``, ``cpu_x_minby``, ``cpu_x_op_floor`` and
    ``cpu_x_python_floor`` divide it by native ``first()``'s, native ``min_by``'s, the
    transformation's floor's and ``floor-python``'s of the same case (a ratio below 1: cheaper).

    ``driver_marginal_per_m_rows_s`` (the source's engines): the driver's Python CPU less the
    precomputed floor's (process start, imports, offsets: a Python source that reads no row),
    per million input rows: what the driver spends on the rows themselves.
    """
    median = {r["engine"]: r["seconds_median"] for r in results if "seconds_median" in r}
    cpu = {r["engine"]: r["cpu_total_s"] for r in results if "cpu_total_s" in r}
    floor_driver = next((r.get("cpu_driver_s") for r in results
                         if r["engine"] == "floor-precomputed"), None)
    for r in results:
        if "seconds_median" not in r:  # not available here (run_case)
            continue
        op_floor = median.get(OPERATOR_FLOORS.get(r["engine"], ""))
        if r["engine"] in SOURCE_SPLIT_ROWS and floor_driver is not None and "cpu_driver_s" in r:
            r["driver_marginal_per_m_rows_s"] = round(
                (r["cpu_driver_s"] - floor_driver) / (r["rows"] / 1e6), 3)
        r.update(x_floor=ratio(r["seconds_median"], median.get("floor-precomputed")),
                 x_empty_floor=ratio(r["seconds_median"], median.get("floor-empty")),
                 x_python_floor=ratio(r["seconds_median"], median.get("floor-python")),
                 x_op_floor=ratio(r["seconds_median"], op_floor),
                 speedup_vs_native=ratio(median.get("native"), r["seconds_median"]),
                 speedup_vs_minby=ratio(median.get("native-minby"), r["seconds_median"]))
        if "cpu_total_s" in r:
            own = r["cpu_total_s"]
            r.update(cpu_per_m_rows_s=round(own / (r["rows"] / 1e6), 3),
                     cpu_x_native=ratio(own, cpu.get("native")),
                     cpu_x_minby=ratio(own, cpu.get("native-minby")),
                     cpu_x_op_floor=ratio(own, cpu.get(OPERATOR_FLOORS.get(r["engine"], ""))),
                     cpu_x_python_floor=ratio(own, cpu.get("floor-python")))
    return results


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` to two decimals; None when either is missing or ``b`` is 0."""
    return round(a / b, 2) if a is not None and b else None
