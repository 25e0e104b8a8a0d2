"""The sink's commit protocol recovers at every crash point and refuses what would lose data.

The reported commit-protocol defects. Crashes are injected at the named steps of
:mod:`spark_stream_sched.testing.faults` (in-process: nothing after the step runs, as if the
driver had died) for batch 0, a middle batch and the final flush, then the batch is committed
again by a fresh committer, as Spark does after a restart: the output must equal the reference
oracle and an uninterrupted run, byte for byte. The ``*_state_as_left_by_*`` tests build the
crashed state from files alone, so they also ran (and failed) against the old committer.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import SpillError, StateError
from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
from spark_stream_sched.runtime.state.commit_log import OWNER_FILE
from spark_stream_sched.runtime.state.lock import LocationLock
from spark_stream_sched.runtime.state.owner import OUTPUT
from spark_stream_sched.spark import register, sink
from spark_stream_sched.testing import faults
from spark_stream_sched.testing.faults import STEPS, InjectedCrash, fill_disk, inject_crash

from .test_sink import (
    FakeTasks,
    batches_of,
    expected_rows,
    make_inputs,
    options,
    output_rows,
    write_file_streams,
)

SINK_STEPS = sorted(s for s in STEPS if s.startswith("sink.") and s != "sink.claimed")
N_BATCHES = 4


def _outputs(path: Path) -> dict[str, bytes]:
    """Every file in the output path but its owner record (which names its query)."""
    if not path.is_dir():
        return {}
    return Outputs({p.name: p.read_bytes() for p in sorted(path.iterdir())
                    if p.name != OUTPUT.file})


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
         crashes: tuple[tuple[str, int | str], ...] = (), **extra: str) -> Path:
    """Run every batch and the final flush; crash once at each ``(step, batch)`` and retry."""
    root = tmp_path / name
    opts = options(root, **extra)
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(make_inputs(), N_BATCHES, 2, seed=11)
    pending = list(crashes)

    def attempt(batch: int | str, action: Any) -> None:
        while pending and pending[0][1] == batch:
            step, _ = pending.pop(0)
            with inject_crash(step, batch=batch), pytest.raises(InjectedCrash):
                action()
        action()

    for batch_id, partitions in enumerate(batches):
        # every attempt stages afresh: a restarted Spark re-runs the batch's write tasks
        attempt(batch_id, lambda b=batch_id, p=partitions: writer.commit(tasks.write(b, p), b))
    attempt("final", lambda: sink.finish_sink(opts))
    return root / "out"


class Outputs(dict[str, bytes]):
    """File name -> bytes, with a short repr for failure reports."""

    def __repr__(self) -> str:
        return f"Outputs({ {k: len(v) for k, v in self.items()} })"


@pytest.fixture(scope="module")
def clean_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    monkeypatch = pytest.MonkeyPatch()
    try:
        out = _run(tmp_path_factory.mktemp("clean"), monkeypatch, "clean")
    finally:
        monkeypatch.undo()
    assert output_rows(out) == expected_rows(make_inputs())
    return Outputs(_outputs(out))


@pytest.mark.parametrize("batch", [0, 2, "final"])
@pytest.mark.parametrize("step", SINK_STEPS)
def test_crash_at_every_step_recovers_identically(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, step: str,
                                                  batch: int | str,
                                                  clean_output: dict[str, bytes]) -> None:
    out = _run(tmp_path, monkeypatch, "crashy", ((step, batch),))
    assert _outputs(out) == clean_output
    assert not list(out.glob(".*.tmp"))


def test_crash_right_after_claiming_a_fresh_location(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     clean_output: dict[str, bytes]) -> None:
    out = _run(tmp_path, monkeypatch, "claimed", (("sink.claimed", 0),))
    assert _outputs(out) == clean_output


@pytest.mark.slow
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from([*range(N_BATCHES), "final"]),
                       st.sampled_from(SINK_STEPS), max_size=N_BATCHES + 1))
def test_random_crash_points_recover_identically(
        tmp_path_factory: pytest.TempPathFactory, clean_output: dict[str, bytes],
        crash_at: dict[int | str, str]) -> None:
    """One crash at a random step in any subset of the batches (a retry after the marker is a
    replay, so a second crash in the same batch would never fire)."""
    order = [*range(N_BATCHES), "final"]
    crashes = [(crash_at[b], b) for b in order if b in crash_at]
    monkeypatch = pytest.MonkeyPatch()
    try:
        out = _run(tmp_path_factory.mktemp("random"), monkeypatch, "q", tuple(crashes))
    finally:
        monkeypatch.undo()
    assert _outputs(out) == clean_output


# -- the reported crashed states, built from files (they also fail on the old committer) ----


def _commit_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opts: dict[str, str],
                    batch_ids: range) -> sink.OrderedAggStreamWriter:
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(make_inputs(), N_BATCHES, 2, seed=11)
    for b in batch_ids:
        writer.commit(tasks.write(b, batches[b]), b)
    return writer


def test_batch_zero_crash_state_as_left_by_a_kill_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_output: dict[str, bytes]) -> None:
    """Defect 1: output of batch 0 written, its state and marker not: the restart commits."""
    opts = options(tmp_path)
    _commit_batches(tmp_path, monkeypatch, opts, range(1))
    state = tmp_path / "ck" / "ordered-agg-sink"
    assert (tmp_path / "out" / "part-batch-000000000000.parquet").exists()
    (state / "commits" / "batch-000000000000.json").unlink()
    written = list((state / "versions" / "batch-000000000000").iterdir())
    assert [p for p in written if p.name.endswith(".state")]
    for path in written:  # the group files and the manifest of batch 0
        path.unlink()
    _commit_batches(tmp_path, monkeypatch, opts, range(N_BATCHES))
    sink.finish_sink(opts)
    assert _outputs(tmp_path / "out") == clean_output


def test_reused_state_location_with_a_fresh_checkpoint_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 2: the old committer took every batch of the second query for a replay."""
    shared = str(tmp_path / "shared-state")
    first = options(tmp_path / "a", stateLocation=shared)
    _commit_batches(tmp_path, monkeypatch, first, range(N_BATCHES))
    second = options(tmp_path / "b", stateLocation=shared)
    with pytest.raises(StateError, match=r"belongs to another query .*checkpointLocation="):
        _commit_batches(tmp_path, monkeypatch, second, range(1))
    assert not (tmp_path / "b" / "out").exists()


def test_recreated_checkpoint_with_the_same_path_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark query id in ``<checkpoint>/metadata`` tells a new query from a restart."""
    opts = options(tmp_path)
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"11111111-aaaa"}\n')
    _commit_batches(tmp_path, monkeypatch, opts, range(1))
    owner = json.loads((checkpoint / "ordered-agg-sink" / OWNER_FILE).read_text())
    assert owner["query_id"] == "11111111-aaaa"
    (checkpoint / "metadata").write_text('{"id":"22222222-bbbb"}\n')
    with pytest.raises(StateError, match="Spark query id '11111111-aaaa'"):
        sink.SinkCommitter(sink.parse_sink_options(opts)).commit_batch(1, [])


def test_second_query_on_a_shared_location_is_refused_while_one_commits(tmp_path: Path) -> None:
    config = sink.parse_sink_options(options(tmp_path))
    with LocationLock(config.state_location, "ordered-agg sink").hold(), \
            pytest.raises(StateError, match="in use by ordered-agg sink with pid"):
        sink.SinkCommitter(config).commit_batch(0, [])


def test_deleted_marker_is_refused_naming_the_missing_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 3: the old committer applied batch N+1 to the state of batch N-1."""
    opts = options(tmp_path)
    writer = _commit_batches(tmp_path, monkeypatch, opts, range(3))
    commits = tmp_path / "ck" / "ordered-agg-sink" / "commits"
    (commits / "batch-000000000002.json").unlink()
    batches = batches_of(make_inputs(), N_BATCHES, 2, seed=11)
    with pytest.raises(StateError, match=r"committing batch 3 .* marker of batch 2 .* missing"):
        writer.commit(FakeTasks(monkeypatch, writer).write(3, batches[3]), 3)


def test_first_commit_must_be_batch_zero(tmp_path: Path) -> None:
    config = sink.parse_sink_options(options(tmp_path))
    with pytest.raises(StateError, match=r"batch 5 .* has no batch: the commit marker of batch 0"):
        sink.SinkCommitter(config).commit_batch(5, [])


def test_truncated_marker_is_a_clear_error(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    opts = options(tmp_path)
    _commit_batches(tmp_path, monkeypatch, opts, range(2))
    marker = tmp_path / "ck" / "ordered-agg-sink" / "commits" / "batch-000000000001.json"
    marker.write_bytes(marker.read_bytes()[:20])
    with pytest.raises(StateError, match=r"commit marker .*batch-000000000001.json is corrupt"):
        sink.finish_sink(opts)


def test_foreign_output_in_a_fresh_location_is_still_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-batch-000000000000.parquet").write_bytes(b"someone else's")
    config = sink.parse_sink_options(options(tmp_path))
    with pytest.raises(StateError, match="already holds results"):
        sink.SinkCommitter(config).commit_batch(0, [])


# -- a real full disk ------------------------------------------------------------------------


def test_full_disk_fails_naming_the_file_then_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_disk: Path,
        clean_output: dict[str, bytes]) -> None:
    opts = options(tmp_path, path=str(small_disk / "out"))
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    sink.SinkCommitter(writer.config).claim()  # the query started: the path is claimed
    filler = fill_disk(small_disk)  # leaving no room for a result file
    tasks = FakeTasks(monkeypatch, writer)
    batches = batches_of(make_inputs(), N_BATCHES, 2, seed=11)

    def commit_all() -> None:
        for b in range(N_BATCHES):
            writer.commit(tasks.write(b, batches[b]), b)

    with pytest.raises(SpillError, match=r"cannot write .*small-disk/out/part-batch-0000000000"):
        commit_all()
    assert not [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]
    committed = sink.read_commits(writer.config)
    failed = committed[-1]["batch_id"] + 1 if committed else 0
    filler.unlink()  # space again: the restarted query goes on from the failed batch
    for b in range(failed, N_BATCHES):
        writer.commit(tasks.write(b, batches[b]), b)
    sink.finish_sink(opts)
    assert _outputs(small_disk / "out") == clean_output
    shutil.rmtree(small_disk / "out")
    assert os.listdir(small_disk) == []


def test_full_disk_while_staging_names_the_file_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_disk: Path) -> None:
    opts = options(tmp_path, stateLocation=str(small_disk / "state"))
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    big = make_inputs(rows=20_000)[0]  # ~1 MB of Arrow: more than the disk holds
    with pytest.raises(SpillError,
                       match=r"batch 0, partition 0: cannot write .*/part-00000-0-\w+\.arrow"):
        FakeTasks(monkeypatch, writer).write(0, [big])
    assert not [p for p in small_disk.rglob("*") if p.is_file()]


# -- real Spark: the driver is SIGKILLed at a named step, then restarted ----------------------

REPO = Path(__file__).resolve().parents[2]


def _sink_job(tmp_path: Path, crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(REPO)}
    for name in (faults.ENV_AT, faults.ENV_ONCE, faults.ENV_PGID):
        env.pop(name, None)
    if crash is not None:  # the crash point kills the driver's session: Python, JVM, workers
        env |= {faults.ENV_AT: crash, faults.ENV_ONCE: str(tmp_path / "crashed-once"),
                faults.ENV_PGID: "session"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.sink_driver",
                             str(tmp_path / "job.json")], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("crash", [pytest.param("sink.output_written:batch=0",
                                                marks=pytest.mark.soak),
                                   "sink.state_written:batch=2",
                                   pytest.param("sink.output_written:batch=final",
                                                marks=pytest.mark.soak)])
def test_driver_killed_inside_a_commit_restarts_to_the_oracle(tmp_path: Path,
                                                               crash: str) -> None:
    tables = make_inputs(rows=900)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=4)
    opts = options(tmp_path, sequenceColumn=SEQUENCE_COLUMN)
    # partitioned by group: the tasks do the work; otherwise the driver merges split groups
    partitioned = crash != "sink.output_written:batch=0"
    (tmp_path / "job.json").write_text(json.dumps(
        {"dirs": [str(d) for d in dirs], "options": opts, "files_per_trigger": 1,
         "partitioned": partitioned}))
    first = _sink_job(tmp_path, crash)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]
    assert (tmp_path / "crashed-once").exists()
    assert "DONE" not in first.stdout
    second = _sink_job(tmp_path, None)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "DONE" in second.stdout
    rows = output_rows(tmp_path / "out")
    assert rows == expected_rows(tables)
    assert len(set(rows)) == len(rows)
    commits = [r for r in sink.read_commits(sink.parse_sink_options(opts))
               if r["batch_id"] != "final" and r["rows_in"]]
    on_driver = sum(r["rows_on_driver"] for r in commits)
    assert on_driver == 0 if partitioned else on_driver > 0


@pytest.mark.spark
def test_spark_query_on_a_reused_state_location_fails_at_start(spark: Any,
                                                               tmp_path: Path) -> None:
    """Defect 2 as a user met it: the second query finished 'successfully' with no output."""
    from spark_stream_sched.jobs.runner import file_streams

    register(spark)
    tables = make_inputs(rows=400)
    dirs = write_file_streams(tables, tmp_path / "in", files_per_input=2)

    def start(name: str) -> Any:
        opts = options(tmp_path / name, sequenceColumn=SEQUENCE_COLUMN,
                       stateLocation=str(tmp_path / "shared-state"))
        frame = file_streams(spark, dirs, "parquet", tables[0].schema, 1, with_position=True)
        frame = frame.drop("dc").withColumnRenamed("input_id", "dc")
        return (frame.writeStream.format("ordered-agg").options(**opts)
                .trigger(availableNow=True).start())

    first = start("a")
    first.awaitTermination()
    assert first.exception() is None
    second = start("b")
    with pytest.raises(Exception, match="belongs to another query"):
        second.awaitTermination()
    assert not (tmp_path / "b" / "out").exists()
