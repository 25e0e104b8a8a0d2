"""``spark-stream-sched report``'s PNG for short and long runs: axes that cover the data.

The metrics files are written as the source's tasks write them (no Spark needed); the figure
the command saves is caught at ``savefig`` and its axes are checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.cli import main
from spark_stream_sched.runtime.state import batch_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_metrics(location: Path, batches: list[dict[str, Any]]) -> None:
    """One task's metrics per batch, as ``read()`` writes them (batch ids from 5 on)."""
    for i, figures in enumerate(batches):
        batch_metrics.write_part(str(location), f"{i + 1:015d}-x", 0,
                                 {"batch_id": 5 + i, "seconds": 0.5, **figures})


def batch(i: int) -> dict[str, Any]:
    """Batch ``i``: 2000 * (i + 1) rows/s, 10 * (i + 1) windows, a lag of 3 + i s, i + 1 MiB."""
    return {"rows_read": 1000 * (i + 1), "windows_out": 10 * (i + 1), "lag_ms": 3000 + 1000 * i,
            "state_bytes": 2**20 * (i + 1)}


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the command saves."""
    from matplotlib.figure import Figure

    figures: list[Any] = []
    original = Figure.savefig

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        figures.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return figures


def report(tmp_path: Path, batches: list[dict[str, Any]], saved: list[Any]) -> Any:
    """Run ``report`` on ``batches``; return the figure it wrote as a PNG."""
    write_metrics(tmp_path / "state", batches)
    out = tmp_path / "report.png"
    assert main(["report", str(tmp_path / "state"), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC)
    (fig,) = saved
    return fig


@pytest.mark.parametrize("n", [1, 2, 40])
def test_the_axes_cover_every_batch_and_value(tmp_path: Path, saved: list[Any], n: int) -> None:
    fig = report(tmp_path, [batch(i) for i in range(n)], saved)
    ids = list(range(5, 5 + n))
    tops = [2000.0 * n, 10.0 * n, 3.0 + n - 1, float(n)]  # rows/s, windows, lag s, MiB
    assert len(fig.axes) == 4
    for ax, top in zip(fig.axes, tops, strict=True):
        low, high = ax.get_xlim()
        assert low <= ids[0] - 0.5  # half a batch of room at either end
        assert high >= ids[-1] + 0.5
        assert high - low >= 3  # one batch does not fill the panel
        assert ax.get_ylim()[0] == 0
        assert ax.get_ylim()[1] > top  # the largest value is inside, not on the frame
    ticks = [t for t in fig.axes[-1].get_xticks() if low <= t <= high]
    assert all(float(t).is_integer() for t in ticks)
    if n <= 2:
        assert ticks == ids  # one tick per batch
    plural = "batch" if n == 1 else "batches"
    assert fig._suptitle.get_text().endswith(f"({n} {plural})")


def test_short_runs_label_each_bar_with_its_value(tmp_path: Path, saved: list[Any]) -> None:
    fig = report(tmp_path, [batch(0), batch(1)], saved)
    labels = [[t.get_text() for t in ax.texts] for ax in fig.axes]
    assert labels == [["2,000", "4,000"], ["10", "20"], ["3", "4"], ["1", "2"]]


def test_missing_and_zero_figures_still_give_an_axis(tmp_path: Path, saved: list[Any]) -> None:
    """No lag (nothing merged yet), no windows and no state: ``n/a`` and 0, on axes 0 to 1."""
    fig = report(tmp_path, [{"rows_read": 10, "lag_ms": None, "state_bytes": 0}], saved)
    _, windows, lag, state = fig.axes
    assert [t.get_text() for t in windows.texts] == ["0"]  # the tasks' sum
    assert [t.get_text() for t in lag.texts] == ["n/a"]
    assert lag.get_ylim() == (0.0, 1.0)
    assert state.get_ylim() == (0.0, 1.0)


def test_a_history_file_adds_memory_and_location_panels(tmp_path: Path, saved: list[Any],
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """A long run's history as JSON lines (the location keeps only ``keepMetrics`` batches):
    source records and sink commit markers alike, with the memory and location series."""
    import json

    history = tmp_path / "history.jsonl"
    records = [{"batch_id": i, **batch(i), "seconds": 0.5, "driver_rss_bytes": 80 << 20,
                "worker_rss_bytes": 120 << 20, "jvm_rss_bytes": 600 << 20,
                "location_bytes": 300_000, "location_files": 60} for i in (2, 0, 1)]
    records.append({"batch_id": 3, "rows_in": 30, "location_files": 61})  # a sink marker
    history.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "report.png"
    assert main(["report", str(history), "--out", str(out)]) == 0
    (fig,) = saved
    assert len(fig.axes) == 6
    memory, location = fig.axes[4:]
    assert [t.get_text() for t in memory.get_legend().get_texts()] == [
        "driver (Python)", "driver (JVM)", "worker (largest)"]
    assert memory.get_ylim()[1] > 600  # MiB of the JVM, inside the panel
    assert [t.get_text() for t in location.get_legend().get_texts()] == ["MiB", "files / 100"]
    assert [line.get_xdata().tolist() for line in location.get_lines()][1] == [0, 1, 2, 3]
    history.write_text('{"batch_id": 0, "wall": 1.5, "jvm_rss_bytes": 1}\n')  # a soak's sample
    saved.clear()
    assert main(["report", str(history), "--out", str(out)]) == 0
    (fig,) = saved
    assert [ax.get_ylabel() for ax in fig.axes] == ["resident memory\n(MiB)"]
    history.write_text('{"batch_id": 0}\nnot json\n')
    assert main(["report", str(history), "--out", str(out)]) == 2
    assert "history.jsonl line 2 is not a batch record" in capsys.readouterr().err


def test_rows_per_second_are_over_the_wall_time_between_batch_ends(tmp_path: Path) -> None:
    """Tasks that read for 0.5 s of batches 10 s apart: the rate is rows per 10 s, not 0.5 s."""
    from spark_stream_sched.commands.report import load

    for i in range(3):
        batch_metrics.write_part(str(tmp_path / "state"), f"{i + 1:015d}-x", 0, {
            "batch_id": i, "rows_read": 1000, "seconds": 0.5, "started_at": 100.0 + 10 * i,
            "ended_at": 102.0 + 10 * i})
    rates = [b["rows_per_second"] for b in load(str(tmp_path / "state"))]
    assert rates == [500.0, 100.0, 100.0]  # the first batch over its own 2 s


def test_the_sink_and_ordered_draw_the_same_panels_as_the_source(
        tmp_path: Path, saved: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A sink's state location and an ordered() query's Spark progress JSON, as recorded."""
    import json

    from tests.test_figures import ORDERED_PROGRESS
    from tests.test_progress import run_sink

    rows = run_sink(tmp_path, monkeypatch, "query-a")
    out = tmp_path / "report.png"
    write_metrics(tmp_path / "state", [batch(0), batch(1)])
    progress = tmp_path / "progress.jsonl"
    progress.write_text("".join(json.dumps(p) + "\n" for p in ORDERED_PROGRESS))
    for recorded in (tmp_path / "state", tmp_path / "ck" / "ordered-agg-sink", progress):
        assert main(["report", str(recorded), "--out", str(out)]) == 0
    source_fig, sink_fig, ordered_fig = saved
    labels = [[ax.get_ylabel() for ax in fig.axes][:4] for fig in saved]  # + memory, location
    assert labels[0] == labels[1] == labels[2] == [
        "input rows / s\n(wall time)", "windows out", "lag behind newest\ninput (event-time s)",
        "state (MiB)"]
    rows_drawn, windows_drawn = ([sum(bar.get_height() for bar in fig.axes[i].patches)
                                  for fig in (sink_fig, ordered_fig)] for i in (0, 1))
    assert rows > 0
    assert all(v > 0 for v in rows_drawn + windows_drawn)
    assert sum(bar.get_height() for bar in sink_fig.axes[3].patches) > 0  # its state files
