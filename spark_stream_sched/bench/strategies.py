"""``bench strategies``: every scheduling strategy on one bursty workload, simulated and real.

The workload follows Jiang & Chakravarthy (2003), §5.1: ``--streams`` self-similar input streams,
each the superposition of 64 Pareto ON/OFF flows
(:func:`~spark_stream_sched.data.bursty.bursty_counts`) with different mean rates, feeding
``--queries`` continuous queries of select/project operators
(:func:`~spark_stream_sched.data.bursty.random_plan` without joins: the executor has none yet).
Every operator carries both the numbers of the fluid model (capacity, selectivity) and real
parameters (a predicate ``u<d> < selectivity`` on an independent uniform column, projections, and
synthetic ``work`` proportional to ``1 / capacity``), so the same plan runs

* in the discrete-time simulator (noise-free; time and memory in the model's units), and
* on the real executor (wall-clock seconds, Arrow bytes; noisy: shared 2-core machine), with
  input packets released on the same ON/OFF schedule (same seed and steps) scaled to
  ``--load`` times the capacity FIFO reaches in an unpaced calibration run (whose learned
  statistics seed every run). Each strategy's own unpaced rate on the calibration input is
  reported too: a strategy whose decisions cost more runs at a higher effective load.

Figures (Jiang & Chakravarthy 2003, Figures 2-4): latency, queue memory and output rate over time,
one PNG per metric and source, written to ``--out`` (default ``docs/img/strategies_*.png``). The
threshold strategy's memory limit ``M`` is 60% of the peak queue memory of path capacity in the same
source (formula 3.3 needs an ``M``; the paper does not give its value).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.bench.common import (
    PLOT_DIR,
    bench_extra,
    format_table,
    plot_path,
    progress,
)
from spark_stream_sched.data.bursty import bursty_counts, random_plan
from spark_stream_sched.runtime.executor import Engine
from spark_stream_sched.runtime.metrics import weighted_quantile
from spark_stream_sched.runtime.packets import default_packet_rows, row_bytes
from spark_stream_sched.runtime.plan import OperatorKind, QueryPlan
from spark_stream_sched.runtime.scheduler import Simulator, get_strategy, strategy_names

Results = list[dict[str, Any]]
DEFAULT_OUT = PLOT_DIR
CAPACITY_SCALE = 100.0  # random_plan capacities x this: dense arrivals in the fluid model
WORK_PER_UNIT_COST = 20  # synthetic passes per tuple of an operator of capacity 1 (unscaled)
PAPER_STRATEGIES = ("chain", "path_capacity", "segment", "simplified_segment", "threshold")

# -- workload ---------------------------------------------------------------------------------


def workload_plan(n_queries: int, n_streams: int, seed: int) -> QueryPlan:
    """Random select/project queries with fluid-model numbers and executor parameters."""
    streams = [f"s{i}" for i in range(n_streams)]
    base = random_plan(n_queries, streams, seed=seed, max_joins=0, max_upper=4)
    ops = []
    for op in base.operators:
        d, depth = base[op], base.depth[op]
        capacity = float(d.capacity or 1.0)
        work = max(1, round(WORK_PER_UNIT_COST / capacity))
        if d.kind is OperatorKind.PROJECT:
            keep = ["ts", "key", "value", *(f"u{j}" for j in range(depth + 1, 8))]
            params: dict[str, Any] = {"columns": keep, "work": work}
        else:
            params = {"predicate": f"u{depth} < {d.selectivity}", "work": work}
        ops.append(dataclasses.replace(d, params=params, capacity=capacity * CAPACITY_SCALE))
    return QueryPlan(ops)


def stream_rates(plan: QueryPlan, load: float) -> dict[str, float]:
    """Mean tuples per time unit per stream so the simulated plan is ``load`` busy on average.

    Streams get rates proportional to 1, 2, ... (Jiang & Chakravarthy 2003: "different mean input
    rates").
    """
    stats = plan.initial_stats()
    demand = dict.fromkeys(plan.streams, 0.0)
    for op in plan.operators:  # no joins: one path per leaf, every tuple of a stream visits it
        for src in plan[op].inputs:
            if src in demand:
                demand[src] += _chain_cost(plan, stats, op)
    weights = np.arange(1, len(plan.streams) + 1, dtype=float)
    per_unit = sum(w * demand[s] for w, s in zip(weights, plan.streams, strict=True))
    return {s: float(load * w / per_unit) for w, s in zip(weights, plan.streams, strict=True)}


def _chain_cost(plan: QueryPlan, stats: Any, op: str, fraction: float = 1.0) -> float:
    """Expected work of one tuple entering ``op`` and everything downstream of it."""
    cost = fraction * float(stats[op].cost)
    for c in plan.consumers(op):
        cost += _chain_cost(plan, stats, c, fraction * stats[op].selectivity)
    return cost


def real_counts(plan: QueryPlan, load: float, capacity: float, steps: int, tick: float,
                seed: int) -> dict[str, np.ndarray]:
    """Executor tuples per tick: the fluid rates rescaled to ``load`` x ``capacity`` tuples/s.

    Same seed and steps as the simulator give the same ON/OFF periods (the same bursts).
    """
    fluid = stream_rates(plan, 1.0)
    k = capacity * tick / sum(fluid.values())
    return bursty_counts({s: load * r * k for s, r in fluid.items()}, steps, seed=seed)


# -- simulator --------------------------------------------------------------------------------


def simulate(plan: QueryPlan, counts: dict[str, np.ndarray], name: str,
             params: dict[str, Any]) -> dict[str, Any]:
    """Run the fluid simulator; return per-step series and the table row."""
    arrivals = {s: {t + 1: float(v) for t, v in enumerate(c) if v > 0} for s, c in counts.items()}
    steps = len(next(iter(counts.values())))
    trace = Simulator(plan, get_strategy(name, **params), arrivals).run(steps)
    out = np.array([float(r.output) for r in trace.records])
    lat = np.array([np.nan if r.latency is None else float(r.latency) for r in trace.records])
    mem = np.array([float(r.memory) for r in trace.records])
    has = out > 0
    row = _row("simulator", name, lat[has], out[has], mem, float(out.sum()) / steps)
    row["output_cv"] = burstiness(out)
    return {"row": row, "time": np.arange(1, steps + 1, dtype=float), "latency": lat,
            "memory": mem, "output": out}


def _row(source: str, name: str, lat: np.ndarray, out: np.ndarray, mem: np.ndarray,
         throughput: float) -> dict[str, Any]:
    mean = float(np.average(lat, weights=out)) if out.sum() > 0 else None
    p99 = weighted_quantile(lat, out, 0.99) if out.sum() > 0 else None
    return {"source": source, "strategy": name, "latency_mean": mean, "latency_p99": p99,
            "peak_memory": float(mem.max()), "mean_memory": float(mem.mean()),
            "throughput": throughput, "output": float(out.sum())}


def burstiness(output: np.ndarray) -> float:
    """Coefficient of variation of the output per time bucket.

    See Jiang & Chakravarthy (2003), Figure 3: smoothness.
    """
    output = np.nan_to_num(np.asarray(output, dtype=float))
    return float(output.std() / output.mean()) if output.mean() > 0 else 0.0


# -- executor ---------------------------------------------------------------------------------


def executor_inputs(counts: dict[str, np.ndarray], tick: float, seed: int,
                    ) -> tuple[dict[str, list[pa.Table]], dict[str, list[float]]]:
    """Packets per stream and their arrival times (s): a tick's tuples arrive together."""
    rng = np.random.default_rng(seed)
    packets: dict[str, list[pa.Table]] = {}
    schedule: dict[str, list[float]] = {}
    for s, n in counts.items():
        table = _stream_table(rng, int(n.sum()), np.repeat(np.arange(len(n)), n), tick)
        rows = default_packet_rows(row_bytes(table.schema))  # half the L2 (Falt & Yaghob, §4)
        starts = np.cumsum(n) - n
        packets[s], schedule[s] = [], []
        for t in np.flatnonzero(n):
            for lo in range(0, int(n[t]), rows):
                packets[s].append(table.slice(int(starts[t]) + lo, min(rows, int(n[t]) - lo)))
                schedule[s].append(float(t) * tick)
    return packets, schedule


def _stream_table(rng: np.random.Generator, rows: int, step: np.ndarray, tick: float) -> pa.Table:
    cols: dict[str, Any] = {"ts": (step * tick * 1000).astype(np.int64),
                            "key": rng.integers(0, 1000, rows), "value": rng.random(rows)}
    cols.update({f"u{j}": rng.random(rows) for j in range(8)})
    return pa.table(cols)


def unpaced_rate(plan: QueryPlan, packets: dict[str, list[pa.Table]], name: str,
                 workers: int, stats: Any = None, params: Any = None) -> tuple[float, Any]:
    """Tuples/s of one run with every packet enqueued at once; also its learned statistics."""
    result = Engine(plan, name, workers=workers, stats=stats, strategy_params=params).run(packets)
    summary = result.metrics.summary()
    return summary["input_rows"] / max(summary["elapsed"], 1e-9), result.stats


def calibrate(plan: QueryPlan, steps: int, tick: float, workers: int,
              seed: int) -> tuple[float, Any, dict[str, list[pa.Table]]]:
    """Capacity (tuples/s, FIFO, unpaced), learned statistics and the calibration packets.

    Two rounds: a guess sizes the packets of the first run, its rate those of the second.
    """
    capacity, stats, packets = 200_000.0, None, {}
    for _ in range(2):
        counts = real_counts(plan, 1.0, capacity, steps, tick, seed)
        packets = executor_inputs(counts, tick, seed)[0]
        capacity, stats = unpaced_rate(plan, packets, "fifo", workers, stats)
    return capacity, stats, packets


def execute(plan: QueryPlan, inputs: tuple[dict[str, list[pa.Table]], dict[str, list[float]]],
            name: str, params: dict[str, Any], workers: int, stats: Any,
            tick: float) -> dict[str, Any]:
    """Run the executor on the paced bursty input; return time series and the table row."""
    engine = Engine(plan, name, workers=workers, strategy_params=params, stats=stats)
    metrics = engine.run(inputs[0], schedule=inputs[1], timeout=600).metrics
    tl = metrics.timeline(tick * 2)
    s = metrics.summary()
    row = {"source": "executor", "strategy": name, "latency_mean": s["latency"]["mean"],
           "latency_p99": s["latency"]["p99"], "peak_memory": s["peak_queue_bytes"] / 1024,
           "mean_memory": s["mean_queue_bytes"] / 1024, "throughput": s["throughput"],
           "output": s["output_rows"], "output_cv": burstiness(tl["output_rate"])}
    return {"row": row, "time": tl["time"], "latency": tl["latency"],
            "memory": tl["memory_mean"] / 1024, "output": tl["output_rate"]}


# -- driver -----------------------------------------------------------------------------------


def _ordered(names: list[str]) -> list[str]:
    """Threshold last: its memory limit comes from path capacity's peak memory."""
    return [n for n in names if n != "threshold"] + (["threshold"] if "threshold" in names else [])


def _threshold_params(name: str, series: dict[str, dict[str, Any]], unit: float) -> dict[str, Any]:
    if name != "threshold":
        return {}
    peak = series.get("path_capacity", next(iter(series.values())))["row"]["peak_memory"]
    return {"memory_limit": max(0.6 * peak * unit, 1e-9)}


def run(*, names: list[str], queries: int, streams: int, steps: int, seconds: float,
        load: float, workers: int, seed: int, out: str, show_progress: bool,
        repeat: int = 1) -> Results:
    """Run every strategy in the simulator and on the executor; write plots; return rows.

    The executor runs ``repeat`` rounds, each calibrated anew (FIFO's unpaced rate) and with
    the strategies interleaved, so that drifting machine load hits all of them alike; its rows
    are medians over the rounds and its plots show the first round.
    """
    plan, names, tick = workload_plan(queries, streams, seed), _ordered(names), seconds / steps
    bar = progress(len(names) * (1 + repeat) + 1, "strategies", show_progress)
    sim: dict[str, dict[str, Any]] = {}
    counts = bursty_counts(stream_rates(plan, load), steps, seed=seed)
    for name in names:
        sim[name] = simulate(plan, counts, name, _threshold_params(name, sim, 1.0))
        bar.update(1)
    bar.update(1)
    rounds: list[dict[str, dict[str, Any]]] = []
    for _ in range(max(1, repeat)):  # calibrate per round: the machine's load drifts
        capacity, stats, cal_packets = calibrate(plan, min(steps, 100), tick, workers, seed + 1)
        inputs = executor_inputs(real_counts(plan, load, capacity, steps, tick, seed), tick, seed)
        real: dict[str, dict[str, Any]] = {}
        for name in names:
            params = _threshold_params(name, real, 1024.0)
            real[name] = execute(plan, inputs, name, params, workers, stats, tick)
            real[name]["row"]["capacity"] = unpaced_rate(plan, cal_packets, name, workers,
                                                         stats, params)[0]
            real[name]["row"]["input_rate"] = capacity * load
            bar.update(1)
        rounds.append(real)
    bar.close()
    plot_all(sim, rounds[0], Path(out), load, workers)
    rows = [s["row"] for s in sim.values()] + [_median([r[n]["row"] for r in rounds])
                                               for n in names]
    return [{"bench": "strategies", "load": load, "runs": 1 if r["source"] == "simulator"
             else len(rounds), **r} for r in rows]


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(np.median([r[key] for r in rows if r[key] is not None]))
    return out


# -- plots ------------------------------------------------------------------------------------

_FIGURES = (("latency", "tuple latency", "Figure 2"), ("memory", "queue memory", "Figure 4"),
            ("output", "output rate", "Figure 3"))
_UNITS = {"simulator": {"time": "time unit", "latency": "time units", "memory": "tuples",
                        "output": "tuples / time unit"},
          "executor": {"time": "seconds", "latency": "seconds", "memory": "KiB (Arrow)",
                       "output": "tuples / s"}}


def plot_all(sim: dict[str, dict[str, Any]], real: dict[str, dict[str, Any]], out: Path,
             load: float, workers: int) -> list[Path]:
    """Write one PNG per metric and source: ``strategies_<sim|exec>_<metric>.png``."""
    bench_extra("matplotlib").use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source, series in (("simulator", sim), ("executor", real)):
        for key, title, figure in _FIGURES:
            note = ("fluid model, noise-free" if source == "simulator" else
                    f"real executor, {workers} worker(s), shared 2-core machine: NOISY")
            path = out / f"strategies_{source[:4]}_{key}.png"
            _plot(series, key, f"{title} over time ({note}); cf. Jiang & Chakravarthy (2003) "
                  f"{figure}; mean "
                  f"load {load:g}; moving average of 1% of the run", _UNITS[source], path)
            written.append(path)
    return written


def _plot(series: dict[str, dict[str, Any]], key: str, title: str, units: dict[str, str],
          path: Path) -> None:
    """Top: Jiang & Chakravarthy (2003), §3; bottom: baselines, Prasaad et al. (2018) heuristics."""
    plt = bench_extra("matplotlib.pyplot")

    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    groups = ([n for n in series if n in PAPER_STRATEGIES],
              [n for n in series if n not in PAPER_STRATEGIES])
    labels = ("Jiang & Chakravarthy (2003) strategies", "baselines, Prasaad et al. (2018)")
    for ax, names, label in zip(axes, groups, labels,
                                strict=True):
        for i, name in enumerate(names):
            s = series[name]
            y = _smooth(np.asarray(s[key], dtype=float), max(1, len(s["time"]) // 100))
            ax.plot(s["time"], y, ("-", "--", ":", "-.")[i % 4], lw=1.0, label=name)
        ax.set_ylabel(f"{key} ({units[key]})")
        ax.set_title(label, fontsize=8, loc="left")
        if names:
            ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel(units["time"])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _smooth(y: np.ndarray, width: int) -> np.ndarray:
    """Moving average that ignores NaN (steps without output)."""
    ok = ~np.isnan(y)
    kernel = np.ones(max(1, min(width, len(y))))
    num = np.convolve(np.where(ok, y, 0.0), kernel, "same")
    den = np.convolve(ok.astype(float), kernel, "same")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


# -- CLI hooks (``spark-stream-sched bench strategies``) -------------------------------------

_COLUMNS = [("source", "source"), ("strategy", "strategy"), ("latency_mean", "mean latency"),
            ("latency_p99", "p99 latency"), ("peak_memory", "peak memory"),
            ("mean_memory", "mean memory"), ("throughput", "throughput"), ("output", "output"),
            ("output_cv", "output CV"),
            ("input_rate", "offered tuples/s"), ("capacity", "unpaced tuples/s"),
            ("runs", "runs")]


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench strategies`` (besides the shared ones)."""
    parser.add_argument("--out", default=None,
                        help=f"directory for the PNG plots (default {DEFAULT_OUT}; --quick: a "
                             "temporary directory)")
    parser.add_argument("--strategies", default=None, help="comma-separated names (default all)")
    parser.add_argument("--queries", type=int, default=None, help="queries (default 16)")
    parser.add_argument("--streams", type=int, default=5, help="input streams (default 5)")
    parser.add_argument("--steps", type=int, default=None, help="simulated time units")
    parser.add_argument("--seconds", type=float, default=None, help="executor input seconds")
    parser.add_argument("--load", type=float, default=0.8, help="mean utilisation (0.8)")
    parser.add_argument("--workers", type=int, default=1, help="executor worker threads")


def run_cli(args: argparse.Namespace) -> Results:
    """Run the bench from parsed CLI flags (``--quick``: tiny sizes for a smoke test)."""
    names = ([n.strip() for n in args.strategies.split(",") if n.strip()]
             if args.strategies else list(strategy_names()))
    quick = bool(args.quick)
    return run(names=names, queries=args.queries or (4 if quick else 16), streams=args.streams,
               steps=args.steps or (60 if quick else 600),
               seconds=args.seconds or (0.15 if quick else 10.0), load=args.load,
               workers=args.workers, seed=args.seed, out=plot_path(args, "out", DEFAULT_OUT),
               show_progress=not args.no_progress, repeat=args.repeat or (1 if quick else 3))


def format_results(results: Results) -> str:
    """The comparison table, one block per source, with units."""
    blocks = []
    for source, units in (("simulator", "time units, tuples, tuples/unit"),
                          ("executor", "seconds, KiB, tuples/s")):
        rows = [r for r in results if r["source"] == source]
        if rows:
            blocks.append(f"{source} ({units})\n" + format_table(_rounded(rows), _COLUMNS))
    return "\n\n".join(blocks)


def _rounded(rows: Results) -> Results:
    out = []
    for r in rows:
        r = dict(r)
        for k in ("latency_mean", "latency_p99"):
            if isinstance(r.get(k), float):
                r[k] = f"{r[k]:.4g}"
        out.append(r)
    return out


def register(bench: Any) -> Any:
    """Return the ``BENCHES`` entry; ``bench`` is the CLI's ``Bench`` record type."""
    return bench("scheduling strategies on bursty input: simulator + executor, PNG plots",
                 add_args, run_cli, format_results)
