"""The executor's Python worker keeps committed group state across micro-batches (JVM needed).

Spark reuses Python workers between tasks (``spark.python.worker.reuse``, default true), so the
state a task committed for version ``v`` is still in that worker's memory when the next batch
loads ``v`` (``runtime/state/group_cache.py``), as Spark's state-store providers keep their
latest versions in the executor. With one core and one task per batch the same worker runs
every batch: all loads after the first batch must hit the cache, and the result must equal the
oracle. Writes are incremental: a group whose state did not change keeps its file.

The query runs in its own ``local[1]`` Spark (a subprocess): in a long-lived session with several
idle Python workers, Spark hands each task the *oldest* idle worker (a FIFO queue), so
consecutive batches rotate over the workers and each finds its cached version one batch stale —
the cache then misses and the checkpointed file is read (correct, only slower). That is what a
shared session showed here: 0 hits, 30 misses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_stream_sched.runtime.state import batch_metrics

from .helpers import (
    assert_matches_oracle,
    expected_rows,
    flatten,
    output_key,
    run_available_now,
    source_options,
    write_inputs,
)

pytestmark = [pytest.mark.spark]


REPO = str(Path(__file__).resolve().parents[2])


def driver_main(options: str, checkpoint: str, out: str) -> None:
    """Run the query to the end on a fresh ``local[1]`` Spark; write its rows as JSON."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    assert spark.sparkContext.getConf().get("spark.python.worker.reuse", "true") == "true"
    rows = flatten(run_available_now(spark, json.loads(options), checkpoint))
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(rows, fh)


@pytest.mark.slow
def test_committed_state_is_served_from_the_reused_worker(tmp_path: Path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=120, numPartitions=1, partitionGroups=6)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": REPO}
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.spark.test_state_cache import "
         "driver_main; driver_main(*sys.argv[1:])", json.dumps(opts), str(tmp_path / "ck"),
         str(tmp_path / "rows.json")], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = sorted(json.loads((tmp_path / "rows.json").read_text()), key=output_key)
    assert_matches_oracle(rows, expected_rows(tables))
    batches = batch_metrics.read_batches(str(tmp_path / "state"))
    assert len(batches) > 3
    assert batches[0]["state_cache_hits"] == 0  # the first batch starts from empty state
    later = batches[1:]
    hits = sum(b["state_cache_hits"] for b in later)
    misses = sum(b["state_cache_misses"] for b in later)
    print(f"\ncache: {hits} hits, {misses} misses over {len(later)} batches; files written "
          f"{sum(b['state_files_written'] for b in batches)}, unchanged "
          f"{sum(b['state_files_unchanged'] for b in batches)}")
    assert hits == 6 * len(later), "a reused worker read its own committed state from disk"
    assert misses == 0
