"""``spark_stream_sched.progress``: the source's and the sink's progress read from their files.

No JVM: the source's metrics files are written as its tasks write them, the sink's markers by
its writer with faked task identities (as in ``tests/spark/test_sink.py``); Spark's progress
objects are stand-ins with the attributes pyspark's ``StreamingQueryProgress`` has. The real
thing over Spark Connect is in ``tests/connect``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spark_stream_sched.inputs import Cursor
from spark_stream_sched.inputs.offsets import Offset, version_id
from spark_stream_sched.progress import format_line, sink_progress, source_progress
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.spark import sink
from tests.spark.test_sink import FakeTasks, batches_of, make_inputs, options


def offset(rows: int) -> Offset:
    return Offset((Cursor("f0", rows, rows, 1_000 + rows), Cursor("f1", 1, 1, 900)))


def spark_progress(batch_id: int, end: Offset | None, rows: int, query_id: str = "q",
                   name: str = "job") -> Any:
    """A stand-in for pyspark's StreamingQueryProgress (the attributes progress.py reads)."""
    source = SimpleNamespace(endOffset=None if end is None else end.text())
    return SimpleNamespace(id=query_id, name=name, batchId=batch_id, numInputRows=rows,
                           durationMs={"triggerExecution": 40 + batch_id}, sources=[source])


def write_source_batches(state: str, n: int) -> list[Offset]:
    """``n`` batches of two parts each; every batch but the last merged, as commit() leaves it."""
    ends = [offset(10 * (b + 1)) for b in range(n)]
    for b, end in enumerate(ends):
        for part in range(2):
            batch_metrics.write_part(state, version_id(end), part, {
                "batch_id": b, "rows_read": 10, "rows_of_partition": 5, "rows_released": 4,
                "windows_out": b + part, "late_dropped": 0, "state_bytes": 100, "lag_ms": 7,
                "seconds": 0.5})
        if b < n - 1:
            batch_metrics.merge_batch(state, version_id(end))
    return ends


def test_source_progress_joins_spark_progress_of_the_same_batch(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    ends = write_source_batches(state, 3)
    other_query = spark_progress(1, offset(999), 5)
    progress = [spark_progress(b, end, 2 * b + 1) for b, end in enumerate(ends)]
    batches = source_progress(state, [*progress, other_query])
    assert [b["batch_id"] for b in batches] == [0, 1, 2]  # the unmerged last batch too
    assert [b["windows_out"] for b in batches] == [1, 3, 5]
    assert [b["spark_input_rows"] for b in batches] == [1, 3, 5]
    assert [b["spark_trigger_ms"] for b in batches] == [40, 41, 42]
    assert all(b["query_name"] == "job" and b["rows_read"] == 10 for b in batches)
    assert format_line(batches[0]) == ("ordered-agg source batch 0: 10 rows in, 1 windows out, "
                                       "0 late dropped, state 200 B, lag 7 ms, 0.50 s")


def test_source_progress_without_spark_progress_and_after(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    write_source_batches(state, 4)
    assert [b["batch_id"] for b in source_progress(state, after=1)] == [2, 3]
    assert all("spark_input_rows" not in b for b in source_progress(state))
    assert source_progress(str(tmp_path / "never-ran")) == []


def test_a_progress_whose_batch_id_differs_is_not_joined(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    ends = write_source_batches(state, 2)
    batches = source_progress(state, [spark_progress(7, ends[0], 1), spark_progress(1, None, 1)])
    assert all("spark_input_rows" not in b for b in batches)


def test_a_query_with_two_ordered_agg_sources_joins_the_one_of_this_location(
        tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    ends = write_source_batches(state, 1)
    progress = spark_progress(0, offset(999), 4)  # the other source's offset first
    progress.sources.append(SimpleNamespace(endOffset=ends[0].text()))
    assert source_progress(state, [progress])[0]["spark_input_rows"] == 4


def run_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query_id: str) -> int:
    """Three batches and ``finish_sink`` of a sink with this Spark query id; return its rows."""
    opts = options(tmp_path)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "metadata").write_text(json.dumps({"id": query_id}))
    config = sink.parse_sink_options(opts)
    sink.SinkCommitter(config).claim()
    writer = sink.OrderedAggStreamWriter(config)
    tasks = FakeTasks(monkeypatch, writer)
    tables = make_inputs(rows=300)
    for batch_id, partitions in enumerate(batches_of(tables, 3, 2, seed=4)):
        writer.commit(tasks.write(batch_id, partitions), batch_id)
    sink.finish_sink(opts)
    return sum(t.num_rows for t in tables)


def test_sink_progress_lists_commits_with_spark_figures(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rows = run_sink(tmp_path, monkeypatch, "query-a")
    state = str(tmp_path / "ck" / "ordered-agg-sink")
    progress = [spark_progress(b, None, 300 + b, query_id="query-a") for b in range(3)]
    commits = sink_progress(state, [*progress, spark_progress(0, None, 1, query_id="other")])
    assert [c["batch_id"] for c in commits] == [0, 1, 2, "final"]
    assert [c.get("spark_input_rows") for c in commits] == [300, 301, 302, None]
    assert sum(c["rows_in"] for c in commits) == rows
    assert commits[-1]["finished"] == [0, 1, 2]
    assert not {"schema", "groups", "fingerprint", "checksum"} & set(commits[0])
    assert [c["batch_id"] for c in sink_progress(state, after=1)] == [2, "final"]


def test_sink_progress_of_an_unused_location_is_empty(tmp_path: Path) -> None:
    assert sink_progress(str(tmp_path / "nothing")) == []


def test_importing_progress_loads_no_pyspark() -> None:
    code = ("import sys, spark_stream_sched.progress\n"
            "print(sorted(n for n in sys.modules if n.split('.')[0] == 'pyspark'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_join_figures_add_up_over_the_parts_and_reach_the_line(tmp_path: Path) -> None:
    state, end = str(tmp_path / "state"), offset(10)
    for part, (results, seconds, pushed) in enumerate([(3, 0.25, 1000), (4, 0.5, 24)]):
        batch_metrics.write_part(state, version_id(end), part, {
            "batch_id": 0, "rows_read": 10, "rows_released": 4, "windows_out": 7,
            "late_dropped": 0, "state_bytes": 100, "lag_ms": None, "seconds": 0.5,
            "join_cleanup_results": results, "join_cleanup_seconds": seconds,
            "join_pushed_bytes": pushed, "join_held_pushed_bytes": 0, "join_pushes": 1,
            "join_cleanups": 1})
    (batch,) = source_progress(state)
    assert (batch["join_cleanup_results"], batch["join_cleanup_seconds"],
            batch["join_pushed_bytes"], batch["join_pushes"]) == (7, 0.75, 1024, 2)
    assert format_line(batch).endswith(", 0.50 s, join: 7 clean-up results in 0.75 s, "
                                       "1,024 B pushed")
