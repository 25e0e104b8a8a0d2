"""Fault injection as tests: kill, corrupt, fill the disk, share a location.

* Random kill points, seeded: a multi-batch source query (``restart_driver.py``) and a sink
  query (``sink_driver.py``) run in their own session and are SIGKILLed — the whole session:
  Python driver, JVM, Spark's Python workers — at several random points: named crash points
  (``spark_stream_sched.testing.faults``) at a random batch (and partition), and random
  wall-clock delays after the attempt's first committed batch. Each is restarted until it prints
  ``DONE``; the output must equal an uninterrupted run byte for byte. The seed is printed; set
  ``SPARK_STREAM_SCHED_FAULT_SEED`` to replay a failing one (``..._FAULT_KILLS`` for more kills).
* Damaged files, two queries on one state location and a full disk: ``test_state_damage.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
from spark_stream_sched.runtime.state.atomic import atomic_writer
from spark_stream_sched.spark import register, sink
from spark_stream_sched.testing import faults

from . import test_sink
from .helpers import (
    assert_matches_oracle,
    expected_rows,
    file_bytes,
    source_options,
    write_inputs,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.soak]
REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("SPARK_STREAM_SCHED_FAULT_SEED")
           or random.SystemRandom().randrange(10**6))
KILLS = int(os.environ.get("SPARK_STREAM_SCHED_FAULT_KILLS", "3"))
ATTEMPT_TIMEOUT = 300.0
#: The drivers' JVMs only live for seconds: C1 alone halves their start-up on busy cores.
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


# -- a driver in its own session, killed at a crash point or after a delay --------------------


@dataclass
class Attempt:
    """One run of a driver: how it was to be killed, and how it ended."""

    kill: str
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None
    killed: bool = False
    stdout: str = ""
    stderr: str = ""


@dataclass
class Chain:
    """The attempts of one query until it printed ``DONE``."""

    name: str
    attempts: list[Attempt] = field(default_factory=list)

    def report(self) -> str:
        kills = sum(a.killed for a in self.attempts)
        lines = [f"{self.name} seed={SEED}: {kills} kills, {len(self.attempts) - 1} restarts"]
        lines += [f"  attempt {i}: {a.kill} -> rc {a.returncode}"
                  f"{' (killed)' if a.killed else ''} after {a.seconds:.1f} s"
                  for i, a in enumerate(self.attempts)]
        return "\n".join(lines)


def _run_driver(argv: list[str], tmp_path: Path, kill: str, crash: str | None = None,
                delay: float | None = None, progress: Callable[[], int] = lambda: 0) -> Attempt:
    """Run ``python -m <argv>``; kill its session at ``crash`` or ``delay`` s after progress."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(REPO), "JAVA_TOOL_OPTIONS": FAST_JVM}
    for name in (faults.ENV_AT, faults.ENV_ONCE, faults.ENV_PGID):
        env.pop(name, None)
    if crash is not None:
        env |= {faults.ENV_AT: crash, faults.ENV_PGID: "session"}
    out, err = tmp_path / "attempt.stdout", tmp_path / "attempt.stderr"
    with open(out, "w", encoding="utf-8") as fo, open(err, "w", encoding="utf-8") as fe:
        proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=REPO, env=env, stdout=fo,
                                stderr=fe, text=True, start_new_session=True)
    attempt = Attempt(kill, started=time.monotonic())
    baseline, kill_at = progress(), None
    deadline = time.monotonic() + ATTEMPT_TIMEOUT
    try:
        while proc.poll() is None:
            now = time.monotonic()
            assert now < deadline, f"driver {argv} still running after {ATTEMPT_TIMEOUT} s"
            if delay is not None and kill_at is None and progress() > baseline:
                kill_at = now + delay  # the query is running batches now
            if kill_at is not None and now >= kill_at:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _kill_leftovers(proc.pid)
    attempt.seconds = time.monotonic() - attempt.started
    attempt.returncode = proc.returncode
    attempt.killed = proc.returncode == -signal.SIGKILL
    attempt.stdout, attempt.stderr = out.read_text(), err.read_text()
    return attempt


def _kill_leftovers(pgid: int) -> None:
    """SIGKILL whatever is left of the driver's session (JVM, Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _count(directory: Path, keep: Callable[[str], bool]) -> int:
    try:
        return sum(keep(n) for n in os.listdir(directory))
    except FileNotFoundError:
        return 0


def _run_chain(chain: Chain, plans: list[Callable[[int], tuple[str, str | None, float | None]]],
               argv: list[str], tmp_path: Path, committed: Callable[[], int]) -> None:
    """Run the driver once per planned kill, then until ``DONE`` (at most twice more)."""
    for plan in [*plans, None, None]:
        kill, crash, delay = plan(committed()) if plan else ("none", None, None)
        attempt = _run_driver(argv, tmp_path, kill, crash, delay, committed)
        chain.attempts.append(attempt)
        print(f"{chain.name}: attempt {len(chain.attempts) - 1}: {kill} -> "
              f"rc {attempt.returncode} after {attempt.seconds:.1f} s, {committed()} batches "
              f"committed", flush=True)
        if "DONE" in attempt.stdout:
            return
        assert attempt.killed, f"{kill}: the driver failed\n{attempt.stderr[-4000:]}"
    pytest.fail(f"{chain.name} did not finish\n{chain.report()}")


# -- 1. random kill points: the source ---------------------------------------------------------


def _write_batch_file(out: Path, table: pa.Table, batch_id: int) -> None:
    """What ``restart_driver.py`` writes per batch (sorted, temporary file + rename)."""
    table = table.sort_by([("window_end", "ascending"), ("window_start", "ascending"),
                           ("meter", "ascending")])
    with atomic_writer(str(out / f"batch-{batch_id:05d}.parquet")) as tmp:
        pq.write_table(table, tmp)


def _clean_source_run(spark: Any, options: dict[str, str], root: Path) -> tuple[Path, float]:
    """An uninterrupted run in this session, written like ``restart_driver.py``.

    Returns the output directory and the median seconds per batch.
    """
    out = root / "out"
    out.mkdir(parents=True)
    query = (spark.readStream.format("ordered-agg").options(**options).load().writeStream
             .foreachBatch(lambda df, b: _write_batch_file(out, df.toArrow(), b))
             .option("checkpointLocation", str(root / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    return out, _median_batch_seconds(query)


def _median_batch_seconds(query: Any) -> float:
    took = sorted(p["durationMs"]["triggerExecution"] for p in query.recentProgress)
    return took[len(took) // 2] / 1000


def _rows(directory: Path) -> list[dict[str, Any]]:
    tables = [pq.read_table(p) for p in sorted(directory.glob("*.parquet"))]
    return pa.concat_tables(tables).to_pylist()


def test_source_killed_at_random_points_restarts_to_identical_output(spark: Any,
                                                                     tmp_path: Path) -> None:
    rng = random.Random(SEED)
    print(f"\nsource kill test: seed {SEED} (SPARK_STREAM_SCHED_FAULT_SEED={SEED} replays it)")
    tables = write_inputs(str(tmp_path / "in"), n_inputs=3, rows=300)
    options = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                             maxRecordsPerTrigger=100)
    clean_out, per_batch = _clean_source_run(
        spark, options | {"stateLocation": str(tmp_path / "clean" / "state")}, tmp_path / "clean")
    clean = file_bytes(clean_out)
    n_batches = len(clean)
    assert n_batches >= 8, "maxRecordsPerTrigger makes a multi-batch query"
    (tmp_path / "options.json").write_text(json.dumps(options))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    argv = ["tests.spark.restart_driver", str(tmp_path / "options.json"), str(ckpt), str(out)]

    def committed() -> int:
        return _count(ckpt / "commits", str.isdigit)

    def planned(done: int) -> tuple[str, str, None]:  # n-th partitions() call of this driver
        nth = rng.randrange(0, max(1, n_batches - done - 2))
        return f"source.planned:batch={nth}", f"source.planned:batch={nth}", None

    def state_written(done: int) -> tuple[str, str, None]:  # Spark's batch id, one partition
        batch, part = rng.randrange(done, max(done + 1, n_batches - 2)), rng.randrange(2)
        spec = f"source.state_written:batch={batch},partition={part}"
        return spec, spec, None

    def delayed(done: int) -> tuple[str, None, float]:
        delay = round(rng.uniform(0.0, 0.6 * per_batch * max(1, n_batches - done - 1)), 3)
        return f"SIGKILL {delay} s after a batch", None, delay

    kinds = [planned, state_written, delayed]
    plans = kinds + [rng.choice(kinds) for _ in range(max(0, KILLS - len(kinds)))]
    rng.shuffle(plans)
    chain = Chain("source")
    _run_chain(chain, plans, argv, tmp_path, committed)
    print(chain.report(), flush=True)

    assert sum(a.killed for a in chain.attempts) >= min(KILLS, 3), chain.report()
    assert file_bytes(out) == clean  # every per-batch Parquet file, byte for byte
    assert_matches_oracle(_rows(out), expected_rows(tables))


# -- 1. random kill points: the sink -----------------------------------------------------------


def test_sink_killed_at_random_points_restarts_to_identical_output(spark: Any,
                                                                   tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    print(f"\nsink kill test: seed {SEED} (SPARK_STREAM_SCHED_FAULT_SEED={SEED} replays it)")
    register(spark)
    tables = test_sink.make_inputs(rows=900)
    dirs = test_sink.write_file_streams(tables, tmp_path / "in", files_per_input=8)
    clean_opts = test_sink.options(tmp_path / "clean", sequenceColumn=SEQUENCE_COLUMN)
    query = test_sink.start_sink_query(spark, dirs, tables[0].schema, clean_opts, 1)
    query.awaitTermination(300)
    assert query.exception() is None
    sink.finish_sink(clean_opts)
    per_batch = _median_batch_seconds(query)
    # the results; the path's owner record names each run's own checkpoint
    clean = {n: b for n, b in file_bytes(tmp_path / "clean" / "out").items()
             if n.startswith("part-")}
    opts = test_sink.options(tmp_path, sequenceColumn=SEQUENCE_COLUMN)
    (tmp_path / "job.json").write_text(json.dumps(
        {"dirs": [str(d) for d in dirs], "options": opts, "files_per_trigger": 1}))
    markers = tmp_path / "ck" / "ordered-agg-sink" / "commits"
    n_batches = _count(tmp_path / "clean" / "ck" / "ordered-agg-sink" / "commits",
                       lambda n: n.startswith("batch-"))
    assert n_batches >= 8

    def committed() -> int:
        return _count(markers, lambda n: n.startswith("batch-") and n.endswith(".json"))

    def at_step(done: int, final: bool = False) -> tuple[str, str, None]:
        step = rng.choice(["sink.output_written", "sink.state_written", "sink.marker_written"])
        batch = rng.choice([*range(done, max(done + 1, n_batches - 2)),  # room for a delay
                            *(["final"] if final else [])])
        return f"{step}:batch={batch}", f"{step}:batch={batch}", None

    def delayed(done: int) -> tuple[str, None, float]:
        delay = round(rng.uniform(0.0, 0.6 * per_batch * max(1, n_batches - done)), 3)
        return f"SIGKILL {delay} s after a batch", None, delay

    plans = [at_step, at_step, delayed] + [rng.choice([at_step, delayed])
                                           for _ in range(max(0, KILLS - 3))]
    rng.shuffle(plans)
    if plans[-1] is at_step:  # only the last kill may hit finish_sink: later ones need batches
        plans[-1] = functools.partial(at_step, final=True)
    chain = Chain("sink")
    _run_chain(chain, plans, ["tests.spark.sink_driver", str(tmp_path / "job.json")], tmp_path,
               committed)
    print(chain.report(), flush=True)

    assert sum(a.killed for a in chain.attempts) >= min(KILLS, 3), chain.report()
    same = same_batching(tmp_path / "clean" / "ck", tmp_path / "ck")
    out = file_bytes(tmp_path / "out")
    print(f"sink: Spark cut the killed run's batches like the clean run's: "
          f"{'all' if same == math.inf else f'the first {same}'}")
    assert {name: out.get(name) for name in clean if batch_of(name) < same} == {
        name: data for name, data in clean.items() if batch_of(name) < same}
    # the rows of every batch, in commit order, are the oracle's whatever Spark's batching
    assert test_sink.output_rows(tmp_path / "out") == test_sink.expected_rows(tables)
    assert test_sink.output_rows(tmp_path / "clean" / "out") == test_sink.expected_rows(tables)


def spark_batches(checkpoint: Path) -> list[list[str]]:
    """Each micro-batch's end offsets as Spark logged them (one line per source)."""
    logs = sorted((int(p.name), p) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    return [p.read_text().splitlines()[2:] for _, p in logs]


def same_batching(clean: Path, killed: Path) -> float:
    """How many micro-batches, from the first, Spark cut alike (``inf``: all of them).

    Spark's file source logs a batch's files (``sources/<i>/<n>``) before the engine logs the
    batch's offsets: a driver killed in between restarts with that entry orphaned and its next
    batch takes two files of that input (Spark's ``FileStreamSource.fetchMaxOffset``), so the
    killed run's later batches differ from the clean run's. The sink owes byte-identical files
    only for the batches Spark cut alike; the rest must still hold exactly the oracle's rows.
    """
    a, b = spark_batches(clean), spark_batches(killed)
    if a == b:
        return math.inf  # part-final too
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def batch_of(name: str) -> float:
    """The micro-batch of a sink output file (``part-final``: after every batch)."""
    digits = name.removeprefix("part-batch-").split(".")[0]
    return int(digits) if digits.isdigit() else float("inf")
