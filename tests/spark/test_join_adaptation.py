"""A 3-way join with distributed adaptation through Spark, SIGKILLed mid-batch and restarted.

``spark.readStream.format("ordered-agg")`` runs ``join(3, within=15 seconds)`` over three file
streams in many micro-batches with ``adaptation=lazy-disk`` and a per-task ``stateMemoryBudget``
small enough that the driver's distribution manager both moves partition groups between the two
tasks and pushes join state to disk (Liu & Rundensteiner 2005, §5-§6). The driver process group is
SIGKILLed in the middle of a batch whose recorded assignment moves or pushes groups (after a task
wrote its state); the restart replays that batch with the recorded assignment. The restarted run's
output must equal, batch for batch, an uninterrupted run of the same query, and over all batches the
batch join oracle: no duplicate, no loss.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark_stream_sched.runtime.distribution import assignments
from spark_stream_sched.runtime.query import spec_from_options
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.testing.faults import ENV_AT, ENV_ONCE, ENV_PGID
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

from .datagen import make_stream, write_stream

pytestmark = [pytest.mark.spark]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOIN = {"keyColumns": "meter", "operators": "join(3, within=15 seconds)"}
#: The batch killed mid-way is the first after this one whose plan moves a group and pushes
#: some; which batch that is follows from the loads, so it is read from the uninterrupted run.
FIRST_CRASH_BATCH = 2
#: The batch killed mid-way when a window follows the join (any batch after pushes began).
WINDOWED_CRASH_BATCH = 4


def write_inputs(root: Path) -> list[Any]:
    """Seven meters over 8 partition groups: uneven per task, so groups move."""
    tables = [make_stream(5, j, 240 + 20 * j, n_keys=7) for j in range(3)]
    for j, table in enumerate(tables):
        write_stream(table, str(root / f"in{j}"), 4)
    return tables


def options(root: Path, state: Path) -> dict[str, str]:
    return {"inputs": ",".join(str(root / f"in{j}") for j in range(3)),
            "stateLocation": str(state), "endOfInput": "availableNow",
            "partitionGroups": "8", "numPartitions": "2", "maxRecordsPerTrigger": "60",
            "adaptation": "lazy-disk", "stateMemoryBudget": "2k", **JOIN}


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def uninterrupted(spark: Any, opts: dict[str, str], checkpoint: str) -> dict[int, list[str]]:
    batches: dict[int, list[str]] = {}

    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = canonical([r.asDict() for r in df.collect()])

    query = (spark.readStream.format("ordered-agg").options(**opts).load().writeStream
             .foreachBatch(collect).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination(timeout=300)
    assert query.exception() is None
    return batches


def driver(options_file: Path, checkpoint: Path, out: Path,
           crash: dict[str, str]) -> subprocess.Popen[str]:
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": REPO, "RESTART_DRIVER_SORT": "none"} | crash
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.restart_driver", str(options_file), str(checkpoint),
         str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, start_new_session=True)


def kill_mid_batch(options_file: Path, checkpoint: Path, out: Path, once: Path,
                   batch: int) -> None:
    """Run the driver until it is SIGKILLed after a task of ``batch`` wrote state."""
    crash = {ENV_AT: f"source.state_written:batch={batch},partition=1",
             ENV_PGID: "session", ENV_ONCE: str(once)}
    first = driver(options_file, checkpoint, out, crash)
    first.communicate(timeout=300)
    assert first.returncode == -9, "the driver was not killed"
    assert once.exists()
    assert sorted(written(out)) == list(range(batch)), "killed in the middle of the batch"


def written(out: Path) -> dict[int, list[str]]:
    return {int(p.stem.split("-")[1]): canonical(pq.read_table(p).to_pylist())
            for p in sorted(out.glob("batch-*.parquet"))}


def records(state: Path) -> list[assignments.Assignment]:
    found = [assignments.read_assignment(str(state), v)
             for v in assignments.recorded_versions(str(state))]
    return [r for r in found if r is not None]


@pytest.mark.slow
def test_sigkill_mid_batch_with_moved_and_pushed_groups_restarts_to_the_oracle(
        spark: Any, tmp_path: Path) -> None:
    tables = write_inputs(tmp_path / "in")
    expected = uninterrupted(spark, options(tmp_path / "in", tmp_path / "state-ref"),
                             str(tmp_path / "ck-ref"))
    reference = records(tmp_path / "state-ref")
    assert len(reference) == len(expected)  # one recorded plan per batch, in batch order
    crash = next((b for b, r in enumerate(reference)
                  if b >= FIRST_CRASH_BATCH and r.moves and r.pushes), None)
    assert crash is not None, "no batch both moves and pushes groups: " + "; ".join(
        r.reason for r in reference)
    assert len(expected) > crash + 3, f"the batch that moves and pushes ({crash}) is too late"

    state, out, checkpoint = tmp_path / "state", tmp_path / "out", tmp_path / "ck"
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps(options(tmp_path / "in", state)), encoding="utf-8")
    kill_mid_batch(options_file, checkpoint, out, tmp_path / "crashed-once", crash)
    planned = records(state)
    killed = planned[-1]  # recorded before any task of the killed batch ran
    assert len(planned) == crash + 1
    # the same plan as the uninterrupted run's batch (versions differ only in the query's token)
    same = (killed.version.split("-")[0], killed.groups, killed.pushes, killed.moves)
    assert same == (reference[crash].version.split("-")[0], reference[crash].groups,
                    reference[crash].pushes, reference[crash].moves)
    assert killed.moves, f"the killed batch moves no group: {killed.reason}"
    assert killed.pushes, f"the killed batch pushes nothing: {killed.reason}"
    record_file = Path(assignments.record_path(str(state), killed.version))
    record_bytes, record_mtime = record_file.read_bytes(), record_file.stat().st_mtime_ns

    second = driver(options_file, checkpoint, out, {})
    stdout, _ = second.communicate(timeout=300)
    assert second.returncode == 0, stdout[-2000:]
    assert "DONE" in stdout

    # the replay ran the recorded assignment: the record is untouched (not planned again) and
    # the batch's task metrics show the groups it names
    assert record_file.read_bytes() == record_bytes
    assert record_file.stat().st_mtime_ns == record_mtime, "the replay planned the batch again"
    merged = {b["version"]: b for b in batch_metrics.read_batches(str(state))}
    assert merged[killed.version]["assignment"] == {
        str(t): list(killed.groups_of(t)) for t in range(killed.tasks)}
    assert merged[killed.version]["pushed_groups"] == list(killed.pushes)

    # output: batch for batch the uninterrupted run's, and over all batches the oracle's
    got = written(out)
    assert got == expected
    oracle = canonical(reference_pipeline(tables, spec_from_options(JOIN, 3)))
    assert len(oracle) > 1000
    assert sorted(row for rows in got.values() for row in rows) == oracle, "duplicate or loss"

    # distributed adaptation really happened, as Liu & Rundensteiner's (2005) lazy-disk allows it
    every = records(state)
    assert sum(len(r.moves) for r in every) >= 2
    assert len({r.groups for r in every}) >= 2, "the assignment never changed"
    assert any(r.pushes for r in every)
    spilled = [b for b in merged.values() if any(v[2] for v in b["group_loads"].values())]
    assert spilled, "no group ever had a generation on disk at a batch boundary"
    for record in every:
        spilled_now = {g for g, _, _, _, s in record.loads if s}
        assert not spilled_now & {m[0] for m in record.moves}, "lazy-disk moved a spilled group"
    moved = sum(r.moved_bytes for r in every)
    pushes = sum(len(r.pushes) for r in every)
    print(f"\n{len(every)} batches, {sum(len(r.moves) for r in every)} moves ({moved} B), "
          f"{pushes} group pushes, {len(spilled)} batches ended with spilled groups, "
          f"{len(oracle)} join results; state files written "
          f"{sum(b['state_files_written'] for b in merged.values())}, unchanged "
          f"{sum(b['state_files_unchanged'] for b in merged.values())}")


#: Order-sensitive stages and a window after the spilling join.
WINDOWED = {**JOIN, "operators": "join(3, within=15 seconds); running(count(*) as rn); "
                                 "delta(ts) as gap", "window": "20 seconds",
            "aggregates": "count(*) as n, first(rn) as fr, max(gap) as mg, first(value_1) as f1"}


def test_a_spilling_join_then_stages_and_a_window_through_spark_equals_the_oracle(
        spark: Any, tmp_path: Path) -> None:
    # The join's state is pushed (lazy-disk, 2k per task) while order-sensitive stages and a
    # window follow it: the join holds back what its clean-up may still precede, so every
    # running count, gap and window is the oracle's.
    query = WINDOWED
    tables = write_inputs(tmp_path / "in")
    opts = {**options(tmp_path / "in", tmp_path / "state"), **query}
    got = uninterrupted(spark, opts, str(tmp_path / "ck"))
    oracle = canonical(reference_pipeline(tables, spec_from_options(query, 3)))
    assert len(oracle) > 30  # 7 meters x 5 windows, each over hundreds of join results
    assert sorted(row for rows in got.values() for row in rows) == oracle
    assert any(r.pushes for r in records(tmp_path / "state")), "nothing was pushed to disk"


@pytest.mark.slow
@pytest.mark.soak
def test_sigkill_with_a_window_after_the_spilling_join_restarts_to_the_oracle(
        spark: Any, tmp_path: Path) -> None:
    # The held results of the join's reorder buffer are part of each group's state: a driver
    # SIGKILLed mid-batch restarts from the checkpoint to the uninterrupted run, batch for batch.
    tables = write_inputs(tmp_path / "in")
    expected = uninterrupted(spark, {**options(tmp_path / "in", tmp_path / "state-ref"),
                                     **WINDOWED}, str(tmp_path / "ck-ref"))
    assert len(expected) > WINDOWED_CRASH_BATCH + 3
    state, out, checkpoint = tmp_path / "state", tmp_path / "out", tmp_path / "ck"
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps({**options(tmp_path / "in", state), **WINDOWED}),
                            encoding="utf-8")
    kill_mid_batch(options_file, checkpoint, out, tmp_path / "crashed-once", WINDOWED_CRASH_BATCH)
    assert any(r.pushes for r in records(state)), "nothing was pushed before the kill"
    second = driver(options_file, checkpoint, out, {})
    stdout, _ = second.communicate(timeout=300)
    assert second.returncode == 0, stdout[-2000:]
    got = written(out)
    assert got == expected
    oracle = canonical(reference_pipeline(tables, spec_from_options(WINDOWED, 3)))
    assert sorted(row for rows in got.values() for row in rows) == oracle
