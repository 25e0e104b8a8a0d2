"""Keyed pipelines through Spark: the source and the sink against the oracle, and a SIGKILL.

The pipelines (``operators`` option) run per partition group inside the source's tasks, with
their state versioned per micro-batch next to the window state, and inside the sink's commit.
Results must equal :func:`~spark_stream_sched.testing.pipeline_reference.reference_pipeline`
for any batching and partitioning, and a driver killed mid-run must restart to the same rows.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.runtime.query import spec_from_options
from spark_stream_sched.spark import register, sink
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

from .helpers import kill_after_batches, write_inputs
from .test_sink import make_inputs, start_sink_query, write_file_streams

pytestmark = [pytest.mark.spark]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Per-meter change of value, de-duplicated repeats, then 20 s / 5 s windows over the changes.
DELTA_WINDOWS = {"keyColumns": "meter", "window": "20 seconds", "slide": "5 seconds",
                 "operators": "dedup(value, within='3 seconds'); delta(value) as change",
                 "aggregates": "count(*) as n, sum(change) as total, first(change) as first_c"}
#: Rows out: running count and the value two readings earlier, per meter.
ROWS = {"keyColumns": "meter",
        "operators": "running(count(*) as n, max(value) as hi); lag(value, 2) as before"}
#: Sessions per meter closed by a 2 s gap.
SESSIONS = {"keyColumns": "meter", "operators": "sessionize(2 seconds)",
            "aggregates": "count(*) as n, first(value) as first_v, last(kind) as last_kind"}
PIPELINES = {"delta_windows": DELTA_WINDOWS, "rows": ROWS, "sessions": SESSIONS}


def _canonical(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples; floats rounded to 9 digits (sums may differ in the last ulp)."""
    def value(v: Any) -> Any:
        return round(v, 9) if isinstance(v, float) and not math.isnan(v) else v
    return sorted((tuple(sorted((k, value(v)) for k, v in r.items())) for r in rows),
                  key=repr)


def _collect(spark: Any, opts: dict[str, str], checkpoint: str) -> list[dict[str, Any]]:
    batches: list[tuple[int, list[dict[str, Any]]]] = []

    def collect(df: Any, batch_id: int) -> None:
        batches.append((batch_id, [r.asDict() for r in df.collect()]))

    reader = spark.readStream.format("ordered-agg").options(**opts)
    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination(timeout=300)
    assert query.exception() is None
    return [row for _, rows in sorted(batches, key=lambda b: b[0]) for row in rows]


def _source_options(root: Path, n_inputs: int, state: Path, pipeline: dict[str, str],
                    **extra: str) -> dict[str, str]:
    return {"inputs": ",".join(str(root / f"in{j}") for j in range(n_inputs)),
            "stateLocation": str(state), "endOfInput": "availableNow", **pipeline, **extra}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_source_runs_pipelines_like_the_oracle_for_any_batching(spark: Any, tmp_path: Path,
                                                                name: str) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=200)
    spec = spec_from_options(PIPELINES[name], 3)
    expected = _canonical(reference_pipeline(tables, spec))
    assert expected, "the workload produces results"
    for i, (records, groups) in enumerate([("40", "3"), ("100000", "5")]):
        opts = _source_options(tmp_path / "in", 3, tmp_path / f"state{i}", PIPELINES[name],
                               maxRecordsPerTrigger=records, partitionGroups=groups)
        got = _collect(spark, opts, str(tmp_path / f"ck{i}"))
        assert _canonical(got) == expected, (name, records, groups)


def test_sink_runs_a_pipeline_like_the_oracle(spark: Any, tmp_path: Path) -> None:
    register(spark)
    tables = make_inputs(rows=900)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=3)
    from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN

    opts = {"path": str(tmp_path / "out"), "checkpointLocation": str(tmp_path / "ck"),
            "inputs": "3", "inputColumn": "dc", "sequenceColumn": SEQUENCE_COLUMN,
            **DELTA_WINDOWS}
    query = start_sink_query(spark, dirs, tables[0].schema, opts, files_per_trigger=1)
    query.awaitTermination()
    assert query.exception() is None
    sink.finish_sink(opts)
    files = sorted((tmp_path / "out").glob("part-*.parquet"))
    got = [r for f in files for r in pq.read_table(f).to_pylist()]
    expected = reference_pipeline(tables, spec_from_options(DELTA_WINDOWS, 3))
    assert _canonical(got) == _canonical(expected)
    assert len(got) == len(expected)


def _driver(options_file: str, checkpoint: str, out: str) -> subprocess.Popen[str]:
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": REPO, "RESTART_DRIVER_SORT": "none"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.restart_driver", options_file, checkpoint, out],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True)


@pytest.mark.slow
@pytest.mark.soak
def test_sigkill_of_the_driver_mid_pipeline_then_restart_matches_the_oracle(
        spark: Any, tmp_path: Path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=150)
    opts = _source_options(tmp_path / "in", 3, tmp_path / "state", DELTA_WINDOWS,
                           maxRecordsPerTrigger="60", partitionGroups="4")
    options_file = str(tmp_path / "options.json")
    Path(options_file).write_text(json.dumps(opts), encoding="utf-8")
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")

    # SIGKILL of the whole session (Python, JVM, Spark's Python workers) after two batches
    kill_after_batches(_driver(options_file, checkpoint, out), 2, group=True)

    second = _driver(options_file, checkpoint, out)
    stdout, _ = second.communicate(timeout=300)
    assert second.returncode == 0
    assert "DONE" in stdout
    names = sorted(n for n in os.listdir(out) if n.endswith(".parquet"))
    assert len(names) > 2, "the restart ran the remaining batches"
    restarted = pa.concat_tables([pq.read_table(os.path.join(out, n)) for n in names]).to_pylist()
    expected = reference_pipeline(tables, spec_from_options(DELTA_WINDOWS, 3))
    assert len(restarted) == len(expected), "no duplicate and no lost row"
    assert _canonical(restarted) == _canonical(expected)
