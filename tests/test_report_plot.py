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
    """Batch ``i``: 2000 * (i + 1) rows/s, a lag of 3 + i s, (i + 1) MiB of state."""
    return {"rows_read": 1000 * (i + 1), "lag_ms": 3000 + 1000 * i, "state_bytes": 2**20 * (i + 1)}


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
    tops = [2000.0 * n, 3.0 + n - 1, float(n)]  # rows/s, lag s, MiB of the last batch
    assert len(fig.axes) == 3
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
    assert labels == [["2,000", "4,000"], ["3", "4"], ["1", "2"]]


def test_missing_and_zero_figures_still_give_an_axis(tmp_path: Path, saved: list[Any]) -> None:
    """No lag (nothing merged yet) and no state: ``n/a`` and 0, on axes from 0 to 1."""
    fig = report(tmp_path, [{"rows_read": 10, "lag_ms": None, "state_bytes": 0}], saved)
    _, lag, state = fig.axes
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
    assert len(fig.axes) == 5
    memory, location = fig.axes[3:]
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
