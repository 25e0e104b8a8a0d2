"""The executor's Python worker keeps committed group state across micro-batches (JVM needed).

Spark reuses Python workers between tasks (``spark.python.worker.reuse``, default true), so the
state a task committed for version ``v`` is still in that worker's memory when the next batch
loads ``v`` (``runtime/state/group_cache.py``), as Spark's state-store providers keep their
latest versions in the executor. With one task per batch the same worker runs every batch: all
loads after the first batch must hit the cache, and the result must equal the oracle. Writes
are incremental: a group whose state did not change keeps its file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_committed_state_is_served_from_the_reused_worker(spark: Any, tmp_path: Path) -> None:
    assert spark.sparkContext.getConf().get("spark.python.worker.reuse", "true") == "true"
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=120, numPartitions=1, partitionGroups=6)
    rows = sorted(flatten(run_available_now(spark, opts, str(tmp_path / "ck"))), key=output_key)
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
