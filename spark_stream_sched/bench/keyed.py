"""``bench keyed``: a keyed operator on W threads, hybrid vs partitioned queue.

See Prasaad et al. (2018), §4, §7.

Parts (cases in :mod:`.keyed_cases`, operators and key placements in :mod:`.keyed_workloads`):

* ``wait`` -- fig. 9's shape: keys uniform or from ``N(0, sigma)`` of decreasing sigma over 100
  partitions, one keyed operator whose per-tuple cost is a **simulated I/O wait** (``time.sleep``
  of ``--wait-us`` per tuple, an external lookup), so the queue disciplines show even on a machine
  with about one usable core; ``adjacent`` (range partitioning, hot partitions alternate between
  workers under ``p % W``) and ``colliding`` (the 25 hottest keys on worker 0) placements;
* ``latency`` -- throughput and per-packet latency (push to release, median and p95) vs
  ``W = 1, 2, 4`` with packets fed at ``--load`` times what one worker can wait through;
* ``cpu`` -- CPU-bound per-tuple costs (``cheap``, ``numpy`` drops the GIL, ``python`` holds it)
  under hash partitioning, reported with the measured number of usable cores;
* ``pipeline`` -- the clickstream chain views -> pairs -> sessionize (Prasaad et al. 2018,
  Table 1) per §6
  heuristic, with a check that every configuration's output is identical.

Rows of :func:`spark_stream_sched.bench.keyed_sessions.run_sessions_bench` (another author's
sessions benchmark) are appended when that module is importable (see :func:`_sessions_rows`).
Every figure is a median of ``--repeat`` runs on a shared machine; the load average is reported.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from spark_stream_sched.bench.common import PLOT_DIR, bench_extra, format_table, plot_path
from spark_stream_sched.bench.keyed_cases import (
    Results,
    Sizes,
    run_cpu,
    run_latency,
    run_pipeline,
    run_wait,
)
from spark_stream_sched.bench.keyed_workloads import machine_capacity

DEFAULT_PLOT = f"{PLOT_DIR}/bench_keyed.png"
WAIT_LABEL = "simulated I/O wait (time.sleep per tuple), not CPU work"


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench keyed``."""
    parser.add_argument("--plot", default=None,
                        help=f"PNG path (default {DEFAULT_PLOT}; --quick: a temporary directory; "
                             "'' = no plot)")
    parser.add_argument("--wait-us", type=float, default=None, metavar="US",
                        help="simulated I/O wait per tuple in microseconds (default 100)")
    parser.add_argument("--load", type=float, default=1.5,
                        help="latency part: offered rate as a multiple of one worker's "
                             "capacity (default 1.5: W = 1 is overloaded)")


def _sessions_rows(rows: int, repeat: int, seed: int) -> Results:
    """Hook: rows of ``bench.keyed_sessions.run_sessions_bench`` when that module exists."""
    try:
        from spark_stream_sched.bench import keyed_sessions
    except ModuleNotFoundError:
        return []
    run = getattr(keyed_sessions, "run_sessions_bench", None)
    if run is None:
        return []
    return [{"part": "sessions", **row} for row in run(rows, 2000, repeat, seed)]


def sizes_of(args: argparse.Namespace) -> Sizes:
    """The run's sizes from the flags (``--quick``: a smoke run of a few seconds)."""
    quick = bool(args.quick)
    wait_us = args.wait_us if getattr(args, "wait_us", None) else (50.0 if quick else 100.0)
    return Sizes(rows=args.rows or (4_096 if quick else 100_000),
                 repeat=args.repeat or (1 if quick else 3), seed=args.seed, quick=quick,
                 wait_us=wait_us, wait_rows=1_024 if quick else 16_384,
                 packet_rows=256 if quick else 2_048, latency_packets=6 if quick else 30,
                 latency_rows=256 if quick else 512, load=getattr(args, "load", 1.5))


def run_cli(args: argparse.Namespace) -> Results:
    """Run every part and the sessions hook; write the plot."""
    sizes = sizes_of(args)
    shown = not args.no_progress
    results: Results = [{"part": "machine", "cores_available": machine_capacity(),
                         "cpu_count": os.cpu_count(), "loadavg": os.getloadavg()[0]}]
    results += run_wait(sizes, shown)
    results += run_latency(sizes, shown)
    results += run_cpu(sizes, shown)
    results += run_pipeline(sizes, shown)
    if not sizes.quick:
        results += _sessions_rows(sizes.rows, sizes.repeat, sizes.seed)
    target = plot_path(args, "plot", DEFAULT_PLOT)
    if target:
        plot(results, Path(target))
    return results


_MACHINE = [("cpu_count", "os.cpu_count()"),
            ("cores_available", "cores measured (2 threads of sha256 vs 1)"), ("loadavg", "load")]
_WAIT = [("keys", "keys"), ("placement", "placement"), ("workers", "W"), ("queue", "queue"),
         ("rows", "rows"), ("tuples_per_s", "tuples/s"), ("speedup", "vs W=1"),
         ("bound_speedup", "bound"), ("hybrid_vs_partitioned", "hyb/part"),
         ("cpu_per_wall", "cpu/wall"), ("loadavg", "load")]
_LATENCY = [("keys", "keys"), ("placement", "placement"), ("queue", "queue"), ("workers", "W"),
            ("offered_tuples_per_s", "offered/s"), ("tuples_per_s", "tuples/s"),
            ("latency_median_ms", "lat. median ms"), ("latency_p95_ms", "lat. p95 ms"),
            ("loadavg", "load")]
_CPU = [("keys", "keys"), ("cost", "cost"), ("queue", "queue"), ("workers", "W"),
        ("rows", "rows"), ("tuples_per_s", "tuples/s"), ("speedup", "vs W=1"),
        ("hybrid_vs_partitioned", "hyb/part"), ("cpu_per_wall", "cpu/wall"),
        ("busiest_share", "busiest"), ("gil_free_fraction", "GIL-free"), ("loadavg", "load")]
_PIPELINE = [("queue", "queue"), ("heuristic", "heuristic"), ("workers", "W"), ("rows", "rows"),
             ("tuples_per_s", "tuples/s"), ("vs_lp_w1", "vs lp W=1"),
             ("cpu_per_wall", "cpu/wall"), ("sessions", "sessions"), ("pairs", "pairs"),
             ("identical", "identical"), ("loadavg", "load")]


def format_results(results: Results) -> str:
    """One table per part (medians; ratios within this run)."""
    def part(name: str) -> Results:
        return [r for r in results if r["part"] == name]

    wait_us = next((r["wait_us"] for r in part("wait")), None)
    blocks = [format_table(part("machine"), _MACHINE)] if part("machine") else []
    blocks += [
        f"(wait) one keyed operator, per-tuple cost = {WAIT_LABEL}, {wait_us} us per tuple; "
        f"'bound' = best possible speedup (hybrid: min(W, 1/hottest partition share); "
        f"partitioned: 1/busiest worker share under p % W)\n{format_table(part('wait'), _WAIT)}",
        f"(latency) same operator ({WAIT_LABEL}), packets paced at 'offered/s'; latency = push "
        f"to release of a packet's output\n{format_table(part('latency'), _LATENCY)}",
        f"(cpu) CPU-bound per-tuple costs, hash partitioning; threads share one GIL and the "
        f"cores measured above\n{format_table(part('cpu'), _CPU)}",
        f"(pipeline) clickstream views -> pairs -> sessionize\n"
        f"{format_table(part('pipeline'), _PIPELINE)}"]
    sessions = part("sessions")
    if sessions:
        keys = [(k, k) for k in sessions[0] if k != "part"]
        blocks.append(f"sessions (bench.keyed_sessions)\n{format_table(sessions, keys)}")
    return "\n\n".join(blocks)


def plot(results: Results, path: Path) -> None:
    """Wait (two placements), latency vs W, CPU speedups: four panels."""
    bench_extra("matplotlib").use("Agg")
    plt = bench_extra("matplotlib.pyplot")
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    wait = [r for r in results if r["part"] == "wait"]
    labels = list(dict.fromkeys(r["keys"] for r in wait))
    for ax, placement in zip(axes[:2], ("colliding", "adjacent"), strict=True):
        for queue, style in (("hybrid", "-"), ("partitioned", "--")):
            for workers in sorted({r["workers"] for r in wait if r["workers"] > 1}):
                pts = [(labels.index(r["keys"]), r["tuples_per_s"]) for r in wait
                       if r["queue"] == queue and r["workers"] == workers
                       and (r["placement"] == placement or r["keys"] == "uniform")]
                if pts:
                    ax.plot(*zip(*sorted(pts), strict=True), style, marker="o",
                            label=f"{queue} W={workers}")
        ones = [(labels.index(r["keys"]), r["tuples_per_s"]) for r in wait
                if r["workers"] == 1 and (r["placement"] == placement or r["keys"] == "uniform")]
        if ones:
            ax.plot(*zip(*sorted(ones), strict=True), ":", color="grey", label="W=1")
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set(title=f"I/O wait (simulated), {placement} placement",
               ylabel="tuples/s (median)", xlabel="keys (right = more skew)")
        ax.legend(fontsize=7)
    lat = [r for r in results if r["part"] == "latency"]
    for queue, style in (("hybrid", "-"), ("partitioned", "--")):
        for keys in dict.fromkeys(r["keys"] for r in lat):
            lat_pts = sorted((r["workers"], r["latency_median_ms"], r["latency_p95_ms"])
                         for r in lat if r["queue"] == queue and r["keys"] == keys)
            if lat_pts:
                w = [x[0] for x in lat_pts]
                line = axes[2].plot(w, [x[1] for x in lat_pts], style, marker="o",
                                    label=f"{queue} {keys} median")
                axes[2].plot(w, [x[2] for x in lat_pts], style, marker="x", alpha=0.5,
                             color=line[0].get_color())
    axes[2].set(yscale="log", title="paced feed: packet latency (o median, x p95)",
                xlabel="workers W", ylabel="ms")
    axes[2].legend(fontsize=7)
    cpu = [r for r in results if r["part"] == "cpu" and r["keys"] == "sigma=1"]
    for cost in dict.fromkeys(r["cost"] for r in cpu):
        for queue, style in (("hybrid", "-"), ("partitioned", "--")):
            pts = sorted((r["workers"], r["speedup"]) for r in cpu
                         if r["cost"] == cost and r["queue"] == queue)
            if pts:
                axes[3].plot(*zip(*pts, strict=True), style, marker="o", label=f"{cost} {queue}")
    cores = next((r["cores_available"] for r in results if r["part"] == "machine"), None)
    axes[3].set(title=f"CPU-bound costs, sigma=1: speedup ({cores or 0:.2f} cores measured)",
                xlabel="workers W", ylabel="vs W=1")
    axes[3].legend(fontsize=7)
    fig.suptitle(f"bench keyed: hybrid vs partitioned queue, 100 partitions; "
                 f"os.cpu_count()={os.cpu_count()}; NOISY shared machine, medians")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def register(bench: Any) -> Any:
    """Return the ``BENCHES`` entry; ``bench`` is the CLI's ``Bench`` record type."""
    return bench("keyed operator on W threads: hybrid vs partitioned queue under skew "
                 "(simulated I/O wait and CPU costs), paced latency, clickstream pipeline",
                 add_args, run_cli, format_results)
