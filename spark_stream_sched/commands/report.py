"""``spark-stream-sched report <stateLocation>``: plot and tabulate the source's batch metrics.

Reads ``<stateLocation>/metrics/`` (written by the ``ordered-agg`` source, see docs/source.md
"Metrics"; nothing is written there) -- or a JSON-lines file of batch records (one merged
metrics record, or one sink commit marker, a line: a long run's history, of which the state
location keeps only the last ``keepMetrics`` batches) -- prints one row per batch and writes a
PNG with three panels over the batches: input rows per second, lag of the ready bound behind
the newest input, and state bytes; and, when the records have them, two more for a query meant
to run for weeks: the resident memory of the driver and the workers, and the files and bytes
under the state location (docs/state_store.md, "Retention"). Needs matplotlib (the ``bench``
extra).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.state import batch_metrics

_COLUMNS = [("batch_id", "batch"), ("rows_read", "rows read"), ("rows_released", "released"),
            ("late_dropped", "late"), ("windows_out", "windows"), ("state_bytes", "state B"),
            ("lag_ms", "lag ms"), ("seconds", "seconds"), ("rows_per_second", "rows/s"),
            ("location_files", "loc files")]
#: The panels drawn when the records have their figures: y label -> {field: legend, scale}.
_USAGE = {
    "resident memory\n(MiB)": {"driver_rss_bytes": ("driver (Python)", 2**20),
                                "jvm_rss_bytes": ("driver (JVM)", 2**20),
                                "worker_rss_bytes": ("worker (largest)", 2**20)},
    "stateLocation": {"location_bytes": ("MiB", 2**20), "location_files": ("files / 100", 100)},
}
#: Rows of the printed table (the newest batches; the plot has them all).
TABLE_ROWS = 20
#: Runs of up to this many batches are drawn as labelled bars, longer ones as lines.
BARS_UP_TO = 12


def register(subparsers: Any) -> None:
    """Add the ``report`` sub-command."""
    parser = subparsers.add_parser(
        "report", help="plot the ordered-agg source's per-batch metrics (PNG + table)",
        description="Read the per-batch metrics files under an ordered-agg stateLocation, "
                    "print a table of the newest batches and write a PNG of input rows/s, lag "
                    "behind the newest input and state bytes over the batches.")
    parser.add_argument("state_location", metavar="stateLocation",
                        help="the source's stateLocation option, or a JSON-lines file of batch "
                             "records")
    parser.add_argument("--out", default="report.png", help="PNG to write (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the table and write the PNG; a location without metrics is a ConfigError."""
    batches = load(args.state_location)
    from spark_stream_sched.bench.common import format_table

    shown = batches[-TABLE_ROWS:]
    if len(shown) < len(batches):
        print(f"last {len(shown)} of {len(batches)} batches")
    print(format_table(shown, _COLUMNS))
    plot(batches, args.out, args.state_location)
    print(f"wrote {args.out}")
    return 0


def load(location: str) -> list[dict[str, Any]]:
    """The batches' figures with ``rows_per_second``; ConfigError when there are none."""
    batches = (read_lines(location) if os.path.isfile(location)
               else batch_metrics.read_batches(location))
    if not batches:
        where = batch_metrics.metrics_dir(location)
        hint = ("it is not a directory" if not os.path.isdir(location) else
                "no batch has run there yet, or it is not an ordered-agg stateLocation")
        raise ConfigError(f"no ordered-agg batch metrics under {where}: {hint}; give the "
                          f"stateLocation option of a query that has run")
    for b in batches:
        seconds = float(b.get("seconds") or 0.0)
        rows = b.get("rows_read", b.get("rows_in")) or 0
        b["rows_per_second"] = rows / seconds if seconds > 0 else 0.0
    return batches


def read_lines(path: str) -> list[dict[str, Any]]:
    """Batch records from a JSON-lines file, in batch order (ConfigError naming a bad line)."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                int(record["batch_id"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path} line {number} is not a batch record with a batch_id "
                                  f"({exc}); give a stateLocation or a file of batch records, "
                                  f"one JSON object a line") from None
            records.append(record)
    return sorted(records, key=lambda r: int(r["batch_id"]))


def base_panels(batches: list[dict[str, Any]]) -> list[tuple[list[float], str]]:
    """Rows/s, lag (s) and state (MiB) as ``(y, label)``.

    None for records that have none of them but memory or location figures (a soak's samples).
    """
    usage = {key for fields in _USAGE.values() for key in fields}
    present = {k for b in batches for k in b}
    if present & usage and not present & {"rows_read", "rows_in", "lag_ms", "state_bytes"}:
        return []
    return [
        ([b["rows_per_second"] for b in batches], "input rows / s\n(slowest task)"),
        ([float("nan") if b.get("lag_ms") is None else b["lag_ms"] / 1000 for b in batches],
         "lag behind newest\ninput (event-time s)"),
        ([float("nan") if b.get("state_bytes") is None else b["state_bytes"] / 2**20
          for b in batches], "state (MiB)"),
    ]


def usage_panels(batches: list[dict[str, Any]]) -> list[tuple[dict[str, list[float]], str]]:
    """The memory and location panels, ``({legend: y}, label)``, with the series present."""
    out = []
    for label, fields in _USAGE.items():
        lines = {legend: [float("nan") if b.get(key) is None else b[key] / scale
                          for b in batches]
                 for key, (legend, scale) in fields.items()}
        lines = {k: y for k, y in lines.items() if any(not math.isnan(v) for v in y)}
        if lines:
            out.append((lines, label))
    return out


def plot(batches: list[dict[str, Any]], out: str, location: str) -> None:
    """Write the PNG of :func:`figure` to ``out`` (its directory is created)."""
    from spark_stream_sched.bench.common import bench_extra

    bench_extra("matplotlib", "the report command").use("Agg")
    plt = bench_extra("matplotlib.pyplot", "the report command")
    fig = figure(batches, location)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def figure(batches: list[dict[str, Any]], location: str) -> Any:
    """Panels over the batch ids: rows/s, lag (s), state (MiB) and :func:`usage_panels`.

    Up to :data:`BARS_UP_TO` batches each batch is a labelled bar, so that a run of one or two
    batches reads as well as a long one; longer runs are lines. Every panel's y axis runs
    from 0 to above its largest value and the x axis has one integer tick per batch (or
    integer ticks chosen by matplotlib, for many batches), at least half a batch beyond each
    end.
    """
    from spark_stream_sched.bench.common import bench_extra

    plt = bench_extra("matplotlib.pyplot", "the report command")
    x = [int(b["batch_id"]) for b in batches]
    panels, usage = base_panels(batches), usage_panels(batches)
    fig, axes = plt.subplots(len(panels) + len(usage), 1, squeeze=False,
                             figsize=(9, 1 + 2 * (len(panels) + len(usage))), sharex=True)
    axes = list(axes[:, 0])
    for ax, (y, label) in zip(axes, panels, strict=False):
        _draw_panel(ax, x, [float(v) for v in y])
        ax.set_ylabel(label, fontsize=9)
    for ax, (lines, label) in zip(axes[len(panels):], usage, strict=True):
        _draw_lines(ax, x, lines)
        ax.set_ylabel(label, fontsize=9)
    _batch_axis(axes[-1], x)
    count = f"{len(batches)} batch" + ("" if len(batches) == 1 else "es")
    fig.suptitle(f"ordered-agg metrics: {location} ({count})", fontsize=10)
    fig.tight_layout()
    return fig


def _draw_panel(ax: Any, x: list[int], y: list[float]) -> None:
    """Bars with their values for a short run, a line for a long one; y from 0 to the top."""
    if len(x) <= BARS_UP_TO:
        bars = ax.bar(x, [0.0 if math.isnan(v) else v for v in y], width=0.6)
        ax.bar_label(bars, labels=[_value_label(v) for v in y], fontsize=8, padding=2)
    else:
        ax.plot(x, y, "o-" if len(x) < 50 else "-", lw=1.2, ms=4)
    top = max((v for v in y if not math.isnan(v)), default=0.0)
    ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)  # room for the bar labels
    ax.grid(alpha=0.3)


def _draw_lines(ax: Any, x: list[int], lines: dict[str, list[float]]) -> None:
    """Several series as lines with a legend; y from 0 to above the largest value."""
    for legend, y in lines.items():
        ax.plot(x, y, "o-" if len(x) < 50 else "-", lw=1.2, ms=4, label=legend)
    top = max((v for y in lines.values() for v in y if not math.isnan(v)), default=0.0)
    ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)


def _value_label(value: float) -> str:
    """A bar's label: ``12,345`` from 100 up, three significant digits below, ``n/a``."""
    if math.isnan(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _batch_axis(ax: Any, x: list[int]) -> None:
    """Batch ids on the shared x axis: integer ticks, room for at least three batches."""
    from matplotlib.ticker import MaxNLocator

    pad = max(0.5, (3 - (max(x) - min(x))) / 2)  # one bar is not as wide as the panel
    ax.set_xlim(min(x) - pad, max(x) + pad)
    if len(x) <= BARS_UP_TO:
        ax.set_xticks(x)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("micro-batch (Spark batch id)")
