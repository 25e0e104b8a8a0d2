"""``bench spark``'s tables: times and ratios, CPU by role, and scaling with cores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Record = dict[str, Any]

TIMES = (("case", "case"), ("engine", "engine"), ("micro_batches", "batches"),
         ("seconds_median", "median s"), ("x_floor", "x floor"),
         ("x_empty_floor", "x empty floor"), ("x_python_floor", "x python floor"),
         ("speedup_vs_native", "native/this"),
         ("matches_truth", "= truth"), ("identical_over_runs", "same over runs"),
         ("identical_across_batchings", "same across batchings"),
         ("first_differs_across_batchings_pct", "first() changed %"),
         ("first_matches_pct", "first() = truth %"), ("windows_emitted", "windows out"),
         ("rows_per_s_median", "rows/s median"), ("load", "load 1 min"))
CPU = (("engine", "engine"), ("cpu_total_s", "all s"), ("cpu_tasks_s", "tasks py s"),
       ("cpu_commit_s", "commit py s"), ("cpu_driver_s", "other driver py s"),
       ("cpu_jvm_s", "jvm s"), ("proc_driver_share_pct", "driver % of py"),
       ("sink_driver_cpu_s", "marker driver s"),
       ("sink_tasks_cpu_s", "marker tasks s"), ("sink_driver_share_pct", "marker driver %"),
       ("groups_on_driver", "groups on driver"), ("rows_on_driver", "rows on driver"),
       ("finish_cpu_s", "finish_sink s"))
CORES = (("engine", "engine"), ("master", "master"), ("micro_batches", "batches"),
         ("seconds_median", "median s"), ("cores_speedup", "speedup"),
         ("matches_truth", "= truth"), ("cpu_total_s", "all s"), ("cores_busy", "cores busy"),
         ("cpu_tasks_s", "tasks py s"), ("cpu_commit_s", "commit py s"), ("cpu_jvm_s", "jvm s"),
         ("load", "load 1 min"))


def format_results(results: Sequence[Record]) -> str:
    """The three tables, each under a line that says what it shows."""
    from spark_stream_sched.bench.common import format_table

    timed = [_with_load(r) for r in results if r.get("case") != "cores"]
    cores = [_with_load(r) for r in results if r.get("case") == "cores"]
    if not timed and not cores:
        return "(no results)"
    parts = []
    if timed:
        parts += [_workload(timed), format_table(timed, TIMES), "",
                  "CPU s per run (mean of the timed runs; processes by role from /proc, lower "
                  "bounds; all = JVM + Python; marker = the sink's commit markers; case main):",
                  format_table([r for r in timed if r["case"] == "main"], CPU)]
    if cores:
        parts += ["", f"Scaling with executor cores (each master in its own process, same "
                  f"files, {cores[0]['runs']} timed runs after {cores[0]['warmup']} warm-up, "
                  f"speedup = median on the fewest cores / median, cores busy = all CPU s / "
                  f"mean wall s):",
                  format_table(cores, CORES)]
    return "\n".join(parts)


def _workload(results: Sequence[Record]) -> str:
    r = results[0]
    cases = sorted({(x["case"], x["rows"]) for x in results}, key=lambda c: c[1])
    sizes = ", ".join(f"{name} {n:,} rows" for name, n in cases)
    watermark = next((x["watermark"] for x in results if x.get("watermark")), None)
    return (f"{sizes}; {r['inputs']} inputs, {r['keys']} keys, window {r['window']} / slide "
            f"{r['slide']}, native watermark {watermark}, batchings {r['batching_a']} vs "
            f"{r['batching_b']} files per input per batch, {r['runs']} timed runs after "
            f"{r['warmup']} warm-up round(s), truth from "
            f"{r['oracle']}; long case: the source's default AvailableNow sizing; x floor = "
            f"median / floor-precomputed median of the same case (the source's floor); x "
            f"python floor = median / floor-python median (the rows handed to Python, the "
            f"transformation's and the sink's floor); native/this = native median / median")


def _with_load(r: Record) -> Record:
    """``r`` with ``load``: the range of the 1-minute load average at the end of its runs."""
    loads = r.get("load_1m") or []
    span = f"{min(loads):.1f}-{max(loads):.1f}" if loads else None
    return {**r, "load": span}
