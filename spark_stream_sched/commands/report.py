"""``spark-stream-sched report <stateLocation | file>``: tabulate and plot any door's batches.

Reads the batches a door recorded (docs/monitoring.md; nothing is written there): a source's
``stateLocation`` (its ``metrics/``), a sink's (its commit markers), or a JSON-lines file of
batch records -- Spark's progress JSON of an ``ordered()`` query (``StreamingQueryProgress.json``
a line), merged source metrics, sink commit markers, or a soak's samples (a long run's history,
of which a state location keeps only the last ``keepMetrics`` batches). Every door's records get
the common fields of :mod:`spark_stream_sched.figures`; the command prints one row per batch and
writes a PNG with the same four panels for every door: input rows per second of wall time,
windows out, lag of the ready bound behind the newest event time, and state bytes; and, when
the records have them, two more for a query meant to run for weeks: the resident memory of the
driver and the workers, and the files and bytes under the state location
(docs/state_store.md, "Retention"). Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.figures import (
    is_spark_progress,
    ordered_figures,
    sink_figures,
    source_figures,
    with_rates,
)
from spark_stream_sched.progress import batches as recorded_batches

_COLUMNS = [("batch_id", "batch"), ("rows_in", "rows in"), ("windows_out", "windows out"),
            ("late_dropped", "late dropped"), ("state_bytes", "state B"),
            ("spill_bytes", "spill B"), ("lag_ms", "lag ms"), ("batch_seconds", "batch s"),
            ("rows_per_second", "rows in/s"), ("location_files", "loc files")]
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
        "report", help="plot the per-batch figures of any ordered-agg door (PNG + table)",
        description="Read the batches an ordered-agg source or sink recorded under its "
                    "stateLocation, or a JSON-lines file of batch records (an ordered() "
                    "query's Spark progress JSON, one a line), print a table of the newest "
                    "batches and write a PNG of input rows/s, windows out, lag behind the "
                    "newest event time and state bytes over the batches.")
    parser.add_argument("state_location", metavar="stateLocation",
                        help="a source's or sink's stateLocation, or a JSON-lines file of batch "
                             "records (Spark progress JSON of an ordered() query)")
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
    """The batches' common figures with ``rows_per_second``; ConfigError when there are none."""
    batches = (common_figures(read_lines(location)) if os.path.isfile(location)
               else recorded_batches(location))
    if not batches:
        hint = ("it is neither a directory nor a file" if not os.path.isdir(location) else
                "no batch has run there yet, or it is not an ordered-agg source's or sink's "
                "stateLocation")
        raise ConfigError(f"no ordered-agg batches recorded under {location}: {hint}; give the "
                          f"stateLocation of a query that has run, or a JSON-lines file of its "
                          f"batch records (docs/monitoring.md)")
    return with_rates(batches)


def common_figures(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A file's records with the common fields: Spark progress, source or sink records.

    Records of none of these kinds (a soak's samples) are kept as they are.
    """
    if records and all(is_spark_progress(r) for r in records):
        found = ordered_figures(records)
        if not found:
            raise ConfigError("the file holds Spark progress without ordered()'s observations "
                              "(ordered_agg_in, ordered_agg_out); give the progress of a query "
                              "that ordered() defined")
        return found
    if records and all("rows_out" in r and "order" in r for r in records):
        return sink_figures(records)
    return [source_figures(r) if "rows_read" in r else r for r in records]


def read_lines(path: str) -> list[dict[str, Any]]:
    """Batch records from a JSON-lines file, in batch order (ConfigError naming a bad line)."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record.get("batchId"), int) and record["batch_id"] != "final":
                    int(record["batch_id"])  # Spark's progress JSON has batchId instead
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path} line {number} is not a batch record with a batch_id "
                                  f"({exc}); give a stateLocation or a file of batch records, "
                                  f"one JSON object a line") from None
            records.append(record)
    return sorted(records, key=_batch_order)


def _batch_order(record: dict[str, Any]) -> tuple[int, int]:
    """Batch order of a record: Spark's id, a sink marker's commit order, ``final`` last."""
    if "order" in record:
        return (0, int(record["order"]))
    value = record["batchId"] if "batchId" in record else record["batch_id"]
    return (0, int(value)) if value != "final" else (1, 0)


def base_panels(batches: list[dict[str, Any]]) -> list[tuple[list[float], str]]:
    """Rows/s, lag (s) and state (MiB) as ``(y, label)``.

    None for records that have none of them but memory or location figures (a soak's samples).
    """
    usage = {key for fields in _USAGE.values() for key in fields}
    present = {k for b in batches for k in b}
    if present & usage and not present & {"rows_read", "rows_in", "lag_ms", "state_bytes"}:
        return []
    return [
        ([b["rows_per_second"] for b in batches], "input rows / s\n(wall time)"),
        ([float("nan") if b.get("windows_out") is None else b["windows_out"]
          for b in batches], "windows out"),
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
    x = batch_axis(batches)
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
    door = batches[0].get("door")
    fig.suptitle(f"ordered-agg {door or 'metrics'}: {location} ({count})", fontsize=10)
    fig.tight_layout()
    return fig


def batch_axis(batches: list[dict[str, Any]]) -> list[int]:
    """The x of each batch: its id; the sink's ``final`` commit one past the batch before."""
    x: list[int] = []
    for b in batches:
        x.append(x[-1] + 1 if b["batch_id"] == "final" and x else
                 0 if b["batch_id"] == "final" else int(b["batch_id"]))
    return x


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
