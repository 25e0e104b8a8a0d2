"""Plots of ``bench adaptation``: ``adapt_fig9.png`` ... ``adapt_fig21.png``.

See Liu & Rundensteiner's (2005) figures.

The x-axis is the input consumed, in micro-batches: the paper's "minutes" at its fixed input
rate (see :mod:`.adaptation`). Curves come from the first repeat (counts are deterministic).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from spark_stream_sched.bench.adaptation_data import PAPER_FIG11, TITLES, Results
from spark_stream_sched.bench.common import bench_extra


def plot_all(results: Results, directory: Path) -> list[Path]:
    """Write one PNG per figure present in ``results``; their paths."""
    bench_extra("matplotlib").use("Agg")
    plt = bench_extra("matplotlib.pyplot")
    load = next((r["loadavg"] for r in results if r["figure"] == "machine"), 0.0)
    written = []
    for figure, draw in (("fig9", _fig9), ("fig11", _fig11), ("fig16", _fig16),
                         ("fig21", _fig21)):
        rows = [r for r in results if r["figure"] == figure]
        if not rows:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
        draw(rows, axes)
        fig.suptitle(f"{TITLES[figure]}\n{rows[0]['tuples']:,} input tuples, runtime join(3); "
                     f"load average {load:.1f} on a shared 2-core machine", fontsize=10)
        fig.tight_layout()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"adapt_{figure}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def _curves(rows: Results, ax: Any, title: str) -> None:
    """Cumulative results of the normal run vs micro-batches, one line per configuration."""
    for r in rows:
        ax.plot(np.arange(1, len(r["curve"]) + 1), r["curve"], label=r["config"])
    ax.set(title=title, xlabel="input consumed (micro-batches; the paper's time axis)",
           ylabel="results produced (cumulative)")
    ax.legend(fontsize=8)


def _fig9(rows: Results, axes: Any) -> None:
    _curves(rows, axes[0], "results of the normal run")
    names = [r["config"] for r in rows]
    x = np.arange(len(rows))
    axes[1].bar(x - 0.2, [r["results_per_s"] for r in rows], 0.4, label="results/s (normal run)")
    twin = axes[1].twinx()
    twin.bar(x + 0.2, [r["cleanup_s"] for r in rows], 0.4, color="tab:red",
             label="clean-up s")
    axes[1].set_xticks(x, names, fontsize=8)
    axes[1].set(title="throughput (median) and clean-up time", ylabel="results/s")
    twin.set_ylabel("clean-up seconds")
    axes[1].legend(loc="upper right", fontsize=8)
    twin.legend(loc="center right", fontsize=8)


def _fig11(rows: Results, axes: Any) -> None:
    _curves(rows, axes[0], "results of the normal run")
    by = {r["config"]: r for r in rows}
    low, high = by.get("30%-Low-OutputRate"), by.get("30%-High-OutputRate")
    if not low or not high or not low["cleanup_results"] or not low["cleanup_s"]:
        return
    p = PAPER_FIG11
    labels = ["clean-up tuples", "clean-up time", "normal-run results"]
    ours = [high["cleanup_results"] / low["cleanup_results"],
            high["cleanup_s"] / low["cleanup_s"],
            high["normal_results"] / max(low["normal_results"], 1)]
    paper = [p["high_tuples"] / p["low_tuples"], p["high_ms"] / p["low_ms"], np.nan]
    x = np.arange(3)
    axes[1].bar(x - 0.2, ours, 0.4, label="this run")
    axes[1].bar(x + 0.2, paper, 0.4, label="Liu & Rundensteiner (2005), fig. 11 text")
    for xi, value in zip(x, ours, strict=True):
        axes[1].annotate(f"x{value:.2f}", (xi - 0.2, value), ha="center", va="bottom",
                         fontsize=8)
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_xticks(x, labels, fontsize=8)
    axes[1].set(title="High-OutputRate / Low-OutputRate", ylabel="ratio", yscale="log")
    axes[1].legend(fontsize=8)


def _fig16(rows: Results, axes: Any) -> None:
    for r, style in zip(rows, ("--", "-"), strict=False):
        memory = np.asarray(r["memory"], float) / 2**20
        for task in range(memory.shape[1]):
            axes[0].plot(memory[:, task], style, label=f"{r['config']}-M{task + 1}")
    axes[0].set(title="memory per task (in-memory join state)", ylabel="MiB",
                xlabel="input consumed (micro-batches)")
    axes[0].legend(fontsize=8)
    for r in rows:
        memory = np.asarray(r["memory"], float)
        top = memory.max(axis=1)
        axes[1].plot(np.where(top > 0, memory.min(axis=1) / np.maximum(top, 1), 1.0),
                     label=f"{r['config']} ({r['adaptations']} adaptations)")
    axes[1].axhline(0.9, color="grey", lw=0.8, ls=":", label="theta_d = 0.9")
    axes[1].set(title="balance M_l / M_m", ylim=(0, 1.05),
                xlabel="input consumed (micro-batches)")
    axes[1].legend(fontsize=8)


def _fig21(rows: Results, axes: Any) -> None:
    _curves(rows, axes[0], "results of the normal run")
    for r in rows:
        per_batch = np.diff(np.asarray([0, *r["curve"]], float))
        window = max(1, len(per_batch) // 15)
        smooth = np.convolve(per_batch, np.ones(window) / window, mode="valid")
        axes[1].plot(np.arange(window, len(per_batch) + 1), smooth, label=r["config"])
    axes[1].set(title="results per micro-batch (moving average): the output rate",
                xlabel="input consumed (micro-batches)", ylabel="results per batch")
    axes[1].legend(fontsize=8)
