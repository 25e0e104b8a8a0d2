"""``bench spark``'s tables: times and ratios, CPU by role, scaling with cores, the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Record = dict[str, Any]

TIMES = (("case", "case"), ("engine", "engine"), ("micro_batches", "batches"),
         ("cpu_per_m_rows_s", "cpu s/M rows"), ("cpu_x_native", "cpu x first()"),
         ("cpu_x_minby", "cpu x min_by"), ("cpu_x_op_floor", "cpu x op floor"),
         ("cpu_x_python_floor", "cpu x python floor"), ("seconds_median", "wall median s"),
         ("x_floor", "x floor"),
         ("x_empty_floor", "x empty floor"), ("x_python_floor", "x python floor"),
         ("x_op_floor", "x op floor"),
         ("speedup_vs_native", "native/this"), ("speedup_vs_minby", "minby/this"),
         ("matches_truth", "= truth"), ("emitted_match_truth", "emitted = truth"),
         ("identical_over_runs", "same over runs"),
         ("identical_across_batchings", "same across batchings"),
         ("first_differs_across_batchings_pct", "first() changed %"),
         ("first_matches_pct", "first() = truth %"), ("windows_emitted", "windows out"),
         ("windows_open", "windows open"),
         ("rows_per_s_median", "rows/s median"), ("load", "load 1 min"))
#: How to read the first table: CPU is the measure, wall time beside it.
CPU_FIRST = ("cpu s/M rows = CPU seconds of all processes (Spark's JVM, its Python workers, the "
             "driver's Python; mean of the timed runs) per million input rows, the measure to "
             "compare (wall time on shared cores spreads too much); cpu x first() / x min_by / x "
             "op floor / x python floor = this engine's CPU over native first()'s, native "
             "min_by's, its floor's and floor-python's (below 1: cheaper); wall median s beside "
             "it:")
CPU = (("engine", "engine"), ("cpu_total_s", "all s"), ("cpu_tasks_s", "tasks py s"),
       ("cpu_commit_s", "commit py s"), ("cpu_driver_s", "other driver py s"),
       ("cpu_jvm_s", "jvm s"), ("cpu_jvm_tasks_s", "jvm tasks s"),
       ("cpu_jvm_driver_s", "jvm driver s"), ("cpu_jvm_runtime_s", "jvm jit+gc s"),
       ("proc_driver_share_pct", "driver % of py"),
       ("driver_marginal_per_m_rows_s", "driver - floor's py s/M rows"),
       ("task_s", "Spark task s"), ("shuffle_bytes_per_row", "shuffle B/row"),
       ("sink_driver_cpu_s", "marker driver s"),
       ("sink_tasks_cpu_s", "marker tasks s"), ("sink_driver_share_pct", "marker driver %"),
       ("groups_on_driver", "groups on driver"), ("rows_on_driver", "rows on driver"),
       ("finish_cpu_s", "finish_sink s"))
CORES = (("engine", "engine"), ("master", "master"), ("cores", "cores"),
         ("micro_batches", "batches"), ("seconds_median", "median s"),
         ("rows_per_s_median", "rows/s"), ("cores_speedup", "speedup"),
         ("matches_truth", "= truth"), ("task_s", "Spark task s"),
         ("outside_tasks_s", "outside tasks s"), ("cpu_total_s", "all s"),
         ("cores_busy", "cores busy"), ("task_cpu_s", "task cpu s"),
         ("driver_cpu_s", "driver cpu s"), ("cpu_commit_s", "commit py s"), ("load", "load 1 min"))
MODEL = (("engine", "engine"), ("batches", "batches"), ("one_core_s", "1 core s"),
         ("task_s", "tasks s (P)"), ("serial_s", "serial s (S)"),
         ("serial_per_batch_s", "S/batch"), ("serial_per_m_rows_s", "S/M rows"),
         ("task_cpu_per_m_rows_s", "task cpu s/M rows"),
         ("driver_cpu_per_batch_s", "driver cpu s/batch"),
         ("driver_cpu_per_m_rows_s", "driver cpu s/M rows"),
         ("shuffle_bytes_per_row", "shuffle B/row"), ("cap", "cap"))
CHECK = (("engine", "engine"), ("master", "measured on"), ("cores", "cores"),
         ("measured_s", "measured s"), ("model_s", "model s"),
         ("measured_rows_per_s", "measured rows/s"), ("model_rows_per_s", "model rows/s"),
         ("measured_over_model", "measured/model"), ("matches_truth", "= truth"))


def format_results(results: Sequence[Record]) -> str:
    """The tables, each under a line that says what it shows."""
    from spark_stream_sched.bench.common import format_table

    missing = [r for r in results if r.get("available") is False]
    results = [r for r in results if r.get("available") is not False]
    timed = [_with_load(r) for r in results if r.get("case") in ("main", "long")]
    cores = [_with_load(r) for r in results if r.get("case") in ("cores", "cluster")]
    model = [r for r in results if r.get("case") == "model"]
    check = [r for r in results if r.get("case") == "check"]
    parts = [f"Not available here: {r['engine']} ({r['unavailable']})" for r in missing]
    if not timed and not cores:
        return "\n".join([*parts, "(no results)"])
    if timed:
        parts += [_workload(timed), CPU_FIRST, format_table(timed, TIMES), "",
                  "CPU s per run (mean of the timed runs; processes by role from /proc, lower "
                  "bounds; all = JVM + Python; marker = the sink's commit markers; Spark task "
                  "s = seconds the tasks held executor cores, from Spark's task metrics, median; "
                  "driver - floor's = the source's driver-side Python CPU less the precomputed "
                  "floor's, per million rows):",
                  format_table(timed, (("case", "case"), *CPU))]
    if cores:
        parts += ["", f"Scaling with executor cores (each master in its own process, same "
                  f"files, {cores[0]['runs']} timed runs after {cores[0]['warmup']} warm-up, "
                  f"speedup = median on the fewest cores / median, cores busy = all CPU s / "
                  f"mean wall s; a cluster's executors are not sampled, its CPU is the "
                  f"driver's):",
                  format_table(cores, CORES)]
    if model:
        parts += ["", *_model_lines(model, check)]
    return "\n".join(parts)


def _model_lines(model: Sequence[Record], check: Sequence[Record]) -> list[str]:
    """The model's inputs and projection, then its checks against measured points."""
    from spark_stream_sched.bench.common import format_table

    project = model[0]["project_cores"]
    columns = (*MODEL, *((f"model_rows_per_s_{n}", f"rows/s @{n}") for n in project))
    lines = ["Scaling model (Amdahl, inputs from the local[1] runs): T(n) = S + P / min(n, cap), "
             "rows/s = rows / T(n); P = seconds the tasks held the executor core (Spark's task "
             "metrics), S = wall - P (the driver's serial part: planning, commits, query start "
             "and stop), cap = tasks a stage can use (partition groups for ours). Assumes at "
             "least min(n, cap) equal tasks per stage; ignores shuffle network, stragglers and "
             "skew, per-task and per-batch fixed costs growing with executors "
             "(spark_stream_sched/bench/spark_model.py):",
             format_table(model, columns)]
    if check:
        lines += ["", "The model against measured runs on more than one core (measured/model = "
                  "measured rows/s / projected rows/s; on this machine the driver shares the "
                  "executors' cores):", format_table(check, CHECK)]
    return lines


def _workload(results: Sequence[Record]) -> str:
    r = results[0]
    cases = sorted({(x["case"], x["rows"]) for x in results}, key=lambda c: c[1])
    sizes = ", ".join(f"{name} {n:,} rows" for name, n in cases)
    watermark = next((f", native watermark {x['watermark']}" for x in results
                      if x.get("watermark")), "")  # none without native (--quick)
    return (f"{sizes}; {r['inputs']} inputs, {r['keys']} keys, window {r['window']} / slide "
            f"{r['slide']}{watermark}, batchings {r['batching_a']} vs "
            f"{r['batching_b']} files per input per batch, {r['runs']} timed runs after "
            f"{r['warmup']} warm-up round(s), truth from "
            f"{r['oracle']}; long case: the source's default AvailableNow sizing; x floor = "
            f"median / floor-precomputed median of the same case (the source's floor); x "
            f"python floor = median / floor-python median (the rows handed to Python, the "
            f"transformation's and the sink's floor); x op floor = a transformation's median "
            f"/ its operator's do-nothing floor's (applyInPandasWithState: "
            f"floor-apply-in-pandas-with-state, -keyed: the same packed input); floor-tws and "
            f"floor-tws-row: that packed input through transformWithStateInPandas and the "
            f"row-based transformWithState, doing nothing and touching no state alike (RocksDB); "
            f"native/this = native median / median; "
            f"minby/this = native-minby median / median (native with min_by over Spark's file "
            f"positions: the correct native first value); emitted = truth: every window "
            f"emitted has the true count and first value (native leaves the last windows "
            f"open)")


def _with_load(r: Record) -> Record:
    """``r`` with ``load``: the range of the 1-minute load average at the end of its runs."""
    loads = r.get("load_1m") or []
    span = f"{min(loads):.1f}-{max(loads):.1f}" if loads else None
    return {**r, "load": span}
