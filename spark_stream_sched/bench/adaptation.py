"""``bench adaptation``: the experiments of Liu & Rundensteiner (2005) on our N-way join.

Figures 9, 11, 16 and 21 of the paper.


Every experiment runs the real ``join(3)`` operator (:mod:`~..runtime.keyed.join`: partition groups,
checksummed spill generations, clean-up of Eq. 1) on generated inputs (:mod:`.adaptation_data`: Liu
& Rundensteiner (2005), §3.4's tuple range and range join ratio per partition group), micro-batch by
micro-batch (:mod:`.adaptation_run`):

* ``fig9``  -- one task, join ratio 3 everywhere, a budget of ``--budget-share`` of the final
  state: push 10% ... 90% of the memory (groups chosen at random, as in the paper) vs no push;
* ``fig11`` -- one task, a third of the groups each with join ratio 4, 2, 1: pushing 30% of the
  least productive groups (largest ``P_s/P_o``, "30%-Low-OutputRate") vs the most productive
  ("30%-High-OutputRate"): results of the normal run, and the clean-up's tuples and time;
* ``fig16`` -- two tasks whose groups get 10 times the other's tuples in alternating phases;
  memory per task per batch without and with distributed adaptation (theta_d = 0.9 every batch);
* ``fig21`` -- three tasks with equal memory, task 0's groups with join ratio 4, the others 1, a
  per-task budget of ``--budget-share`` of an equal share of the final state: lazy-disk vs
  active-disk (theta_d = 0.8, theta_f = 2, 30% pushes), and everything in memory for reference.

The paper's x-axis is wall time at a fixed input rate; here the inputs are fed as fast as the
join goes, so the curves are plotted against the input consumed (micro-batches), which is the
same axis at a fixed rate, and wall-clock rates are reported separately. Every run's results are
checked against the batch oracle (:func:`~.adaptation_data.oracle_ids`); the run is repeated
``--repeat`` times (medians of the times; counts are identical, and checked to be).
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.bench.adaptation_data import (
    PAPER_FIG11,
    TITLES,
    Results,
    Workload,
    generate,
    oracle_ids,
    same,
    uniform,
)
from spark_stream_sched.bench.adaptation_run import ClusterConfig, Run, run_cluster, run_disk
from spark_stream_sched.bench.common import PLOT_DIR, format_table, plot_path, progress
from spark_stream_sched.errors import ConfigError

DEFAULT_PLOT_DIR = PLOT_DIR
FIGURES = ("fig9", "fig11", "fig16", "fig21")
#: Liu & Rundensteiner (2005), §4.4, fig. 11: clean-up of 30%-Low-OutputRate vs 30%-High-OutputRate.

@dataclass(frozen=True)
class Sizes:
    """Sizes of one ``bench adaptation`` run."""

    rows: int
    repeat: int
    seed: int
    groups: int
    batch_rows: int
    budget_share: float


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench adaptation`` (``--rows``: tuples per input)."""
    parser.add_argument("--plot-dir", default=None,
                        help=f"directory of adapt_fig*.png ('' = no plots; default "
                             f"{DEFAULT_PLOT_DIR}; --quick: a temporary directory)")
    parser.add_argument("--figures", default=",".join(FIGURES),
                        help=f"comma-separated subset of {','.join(FIGURES)}")
    parser.add_argument("--groups", type=int, default=None,
                        help="partition groups (default 60; quick 15)")
    parser.add_argument("--batches", type=int, default=None,
                        help="micro-batches per run: adaptation points (default 40; quick 8)")
    parser.add_argument("--budget-share", type=float, default=0.4,
                        help="memory budget as a share of the state without pushes (0.4)")


def sizes_of(args: argparse.Namespace) -> Sizes:
    """Sizes from the flags (``--quick``: 900 tuples per input, 15 groups, one run)."""
    rows = args.rows or (900 if args.quick else 30_000)
    batches = args.batches or (8 if args.quick else 40)
    groups = args.groups if args.groups is not None else (15 if args.quick else 60)
    if not 0 < args.budget_share <= 1 or batches < 1 or groups < 3:
        raise ConfigError(f"--budget-share must be in (0, 1], --batches >= 1 and --groups >= 3;"
                          f" got {args.budget_share}, {batches}, {groups}")
    return Sizes(rows=rows, repeat=args.repeat or (1 if args.quick else 3), seed=args.seed,
                 groups=groups, batch_rows=max(3, 3 * rows // batches),
                 budget_share=args.budget_share)


def run_cli(args: argparse.Namespace) -> Results:
    """Run the chosen figures; write their plots when ``--plot-dir`` is set."""
    figures = [f.strip() for f in args.figures.split(",") if f.strip()]
    return run(sizes_of(args), figures, plot_path(args, "plot_dir", DEFAULT_PLOT_DIR) or None,
               not args.no_progress)


def run(sizes: Sizes, figures: list[str], plot_dir: str | None, shown: bool = False) -> Results:
    """Rows of every configuration of ``figures`` (and the machine's load); plots if asked."""
    from spark_stream_sched.bench import adaptation_plot

    unknown = sorted(set(figures) - set(FIGURES))
    if unknown:
        raise ConfigError(f"unknown figures {unknown}; choose from {', '.join(FIGURES)}")
    results: Results = [{"figure": "machine", "cpu_count": os.cpu_count(),
                         "loadavg": os.getloadavg()[0]}]
    total = sum(len(CONFIGS[f](sizes, 1)) * sizes.repeat + 1 for f in figures)
    with progress(total, "bench adaptation", shown) as bar:
        for figure in figures:
            results += _figure(figure, sizes, bar)
    if plot_dir:
        adaptation_plot.plot_all(results, Path(plot_dir))
    return results


Runner = Callable[[pa.Table], Run]


def _figure(figure: str, sizes: Sizes, bar: Any) -> Results:
    """Generate the figure's data and its oracle; run the reference, then the rest."""
    table = generate(WORKLOADS[figure](sizes))
    expected = oracle_ids(table, sizes.groups)
    bar.update(1)
    label, reference = next(iter(CONFIGS[figure](sizes, 0).items()))
    runs = _repeat(reference, table, sizes.repeat, bar)
    rows = [_summary(figure, label, table.num_rows, runs, expected)]
    for label, runner in list(CONFIGS[figure](sizes, _final_state(runs[0])).items())[1:]:
        rows.append(_summary(figure, label, table.num_rows,
                             _repeat(runner, table, sizes.repeat, bar), expected))
    return rows


def _repeat(runner: Runner, table: pa.Table, repeat: int, bar: Any) -> list[Run]:
    """``repeat`` runs of ``runner`` on ``table``."""
    runs = []
    for _ in range(repeat):
        runs.append(runner(table))
        bar.update(1)
    return runs


def _final_state(run: Run) -> int:
    """Bytes of state at the end of an all-in-memory run (the budgets' 100%)."""
    return int(sum(run.memory[-1]))


def _summary(figure: str, label: str, tuples: int, runs: list[Run], expected: np.ndarray
             ) -> dict[str, Any]:
    """Medians of the times over ``runs``; counts of the first (all must agree)."""
    first = runs[0]
    normal = statistics.median(r.normal_seconds for r in runs)
    cleanup = statistics.median(r.cleanup_seconds for r in runs)
    return {
        "figure": figure, "config": label, "tuples": tuples,
        "normal_results": first.normal_results, "cleanup_results": first.cleanup_results,
        "normal_s": normal, "cleanup_s": cleanup, "total_s": normal + cleanup,
        "results_per_s": first.normal_results / normal if normal else 0.0,
        "tuples_per_s": tuples / normal if normal else 0.0,
        "pushes": first.pushes, "pushed_mb": first.pushed_bytes / 2**20,
        "moves": first.moves, "adaptations": first.adaptations,
        "moved_mb": first.moved_bytes / 2**20,
        "move_s": statistics.median(r.move_seconds for r in runs),
        "output_equal": all(r.ids is not None and same(r.ids, expected) for r in runs),
        "deterministic": all(r.curve == first.curve and r.memory == first.memory
                             for r in runs),
        "balance": statistics.fmean(min(m) / max(m) if max(m) else 1.0 for m in first.memory),
        "repeats": len(runs), "loadavg": os.getloadavg()[0],
        "curve": first.curve, "memory": first.memory,
    }


# -- the four experiments: workloads and configurations ---------------------------------------

def _fig9_workload(s: Sizes) -> Workload:
    return Workload(s.rows, s.groups, uniform(s.groups, 3.0), (uniform(s.groups),),
                    s.rows // 2, seed=s.seed)


def _fig11_workload(s: Sizes) -> Workload:
    ratio = tuple((4.0, 2.0, 1.0)[g % 3] for g in range(s.groups))
    return Workload(s.rows, s.groups, ratio, (uniform(s.groups),), s.rows // 2, seed=s.seed)


def _fig16_workload(s: Sizes) -> Workload:
    half = s.groups // 2
    heavy = tuple(10.0 if g < half else 1.0 for g in range(s.groups))
    return Workload(s.rows, s.groups, uniform(s.groups), (heavy, heavy[::-1]), s.rows // 2,
                    phase_rows=max(1, s.rows // 6), seed=s.seed)


def _fig21_workload(s: Sizes) -> Workload:
    ratio = tuple(4.0 if g % 3 == 0 else 1.0 for g in range(s.groups))
    return Workload(s.rows, s.groups, ratio, (uniform(s.groups),), s.rows // 2, seed=s.seed)


def _fig9_configs(s: Sizes, state: int) -> dict[str, Runner]:
    budget = int(s.budget_share * state)

    def push(fraction: float, budget: int | None) -> Runner:
        return lambda t: run_disk(t, s.groups, budget, fraction, "random", s.batch_rows, s.seed)

    return {"0%-push": push(0.3, None),
            **{f"{pct}%-push": push(pct / 100, budget) for pct in (10, 30, 50, 70, 90)}}


def _fig11_configs(s: Sizes, state: int) -> dict[str, Runner]:
    budget = int(s.budget_share * state)
    return {"no-push": lambda t: run_disk(t, s.groups, None, 0.3, "low", s.batch_rows),
            "30%-Low-OutputRate": lambda t: run_disk(t, s.groups, budget, 0.3, "low",
                                                     s.batch_rows),
            "30%-High-OutputRate": lambda t: run_disk(t, s.groups, budget, 0.3, "high",
                                                      s.batch_rows)}


def _fig16_configs(s: Sizes, state: int) -> dict[str, Runner]:
    owner = [0 if g < s.groups // 2 else 1 for g in range(s.groups)]
    return {"No-Distributed-Adapt": lambda t: run_cluster(
                t, s.groups, owner, ClusterConfig(2, "none"), s.batch_rows),
            "Distributed-Adapt": lambda t: run_cluster(
                t, s.groups, owner, ClusterConfig(2, "lazy-disk", theta_d=0.9), s.batch_rows)}


def _fig21_configs(s: Sizes, state: int) -> dict[str, Runner]:
    owner = [g % 3 for g in range(s.groups)]
    budget = int(s.budget_share * state / 3)

    def cluster(policy: str, budget: int | None) -> Runner:
        config = ClusterConfig(3, policy, budget=budget, theta_d=0.8, theta_f=2.0)
        return lambda t: run_cluster(t, s.groups, owner, config, s.batch_rows)

    return {"all-in-memory": cluster("none", None), "lazy-disk": cluster("lazy-disk", budget),
            "active-disk": cluster("active-disk", budget)}


WORKLOADS: dict[str, Callable[[Sizes], Workload]] = {
    "fig9": _fig9_workload, "fig11": _fig11_workload, "fig16": _fig16_workload,
    "fig21": _fig21_workload}
#: ``CONFIGS[f](sizes, state)``: label -> runner. The first is the reference (nothing pushed);
#: the others' budgets are shares of ``state``, the bytes of its final state.
CONFIGS: dict[str, Callable[[Sizes, int], dict[str, Runner]]] = {
    "fig9": _fig9_configs, "fig11": _fig11_configs, "fig16": _fig16_configs,
    "fig21": _fig21_configs}


# -- report -----------------------------------------------------------------------------------

_COMMON = [("config", "config"), ("normal_results", "results (normal run)"),
           ("results_per_s", "results/s"), ("tuples_per_s", "input tuples/s")]
_CHECKS = [("output_equal", "output equal"), ("deterministic", "deterministic"),
           ("loadavg", "load")]
_DISK = [("pushes", "pushes"), ("pushed_mb", "pushed MiB"), ("cleanup_results", "clean-up results"),
         ("cleanup_s", "clean-up s"), ("total_s", "total s")]
_MOVES = [("adaptations", "adaptations"), ("moves", "groups moved"), ("moved_mb", "moved MiB"),
          ("move_s", "move s"), ("balance", "mean M_l/M_m")]
COLUMNS = {"fig9": _COMMON + _DISK + _CHECKS, "fig11": _COMMON + _DISK + _CHECKS,
           "fig16": _COMMON + _MOVES + _CHECKS, "fig21": _COMMON + _DISK + _MOVES + _CHECKS}


def fig11_comparison(rows: Results) -> str:
    """Clean-up of High- vs Low-OutputRate as ratios, ours beside the paper's.

    See Liu & Rundensteiner (2005), §4.4.
    """
    by = {r["config"]: r for r in rows if r["figure"] == "fig11"}
    low, high = by.get("30%-Low-OutputRate"), by.get("30%-High-OutputRate")
    if not low or not high or not low["cleanup_results"] or not low["cleanup_s"]:
        return ""
    p = PAPER_FIG11
    tuples = high["cleanup_results"] / low["cleanup_results"]
    seconds = high["cleanup_s"] / low["cleanup_s"]
    normal = high["normal_results"] / max(low["normal_results"], 1)
    per_tuple = [1e6 * r["cleanup_s"] / max(r["cleanup_results"], 1) for r in (low, high)]
    return (f"clean-up High/Low: tuples x{tuples:.2f} (paper "
            f"x{p['high_tuples'] / p['low_tuples']:.2f}), time x{seconds:.2f} (paper "
            f"x{p['high_ms'] / p['low_ms']:.2f}); per clean-up tuple {per_tuple[0]:.2f} / "
            f"{per_tuple[1]:.2f} us (paper {1e3 * p['low_ms'] / p['low_tuples']:.0f} / "
            f"{1e3 * p['high_ms'] / p['high_tuples']:.0f} us); normal-run results High/Low "
            f"x{normal:.2f}")


def format_results(results: Results) -> str:
    """One table per figure (medians of the times), plus fig 11's comparison with the paper."""
    machine = [r for r in results if r["figure"] == "machine"]
    blocks = [f"cpu_count={r['cpu_count']} load average={r['loadavg']:.2f}" for r in machine]
    for figure in FIGURES:
        rows = [r for r in results if r["figure"] == figure]
        if rows:
            blocks.append(f"({figure}) {TITLES[figure]}; {rows[0]['tuples']:,} input tuples\n"
                          f"{format_table(rows, COLUMNS[figure])}")
    comparison = fig11_comparison(results)
    if comparison:
        blocks.append(comparison)
    return "\n\n".join(blocks)


def register(bench: Any) -> Any:
    """Return the ``BENCHES`` entry; ``bench`` is the CLI's ``Bench`` record type."""
    return bench("Liu & Rundensteiner (2005), figs 9, 11, 16, 21: disk adaptation, clean-up, "
                 "distributed "
                 "adaptation, lazy- vs active-disk on the runtime's 3-way join",
                 add_args, run_cli, format_results)
