"""The soak harness: a long stream through real Spark, SIGKILLed every ~100 batches, sampled.

A stream of small micro-batches over three inputs runs a spilling join followed by a keyed
operator (``join(3, within=2 seconds, budget=4k); running(count(*) as rn)``) through the
``ordered-agg`` source or sink, in a driver program (:mod:`tests.spark.soak_driver`) whose
whole process group -- Python, the JVM, Spark's Python workers -- is SIGKILLed by a crash point
every ``kill_every`` batches and restarted from its checkpoint, until the stream ends. Every
batch appends a sample: RSS of the JVM, of the driver's Python processes and of the largest
Python worker, and the files and bytes under the state location.

The checks: the output equals an uninterrupted run's, batch for batch (the same query driven
in-process, without Spark: the source's stream reader in Spark's call order, the sink's writer
with the tasks' identity faked; :func:`equal_to_uninterrupted`), and every series is flat
(:func:`tests.spark.soak_samples.violations`).

``python -m tests.spark.soak --mode source --batches 2000 --kill-every 100 --work DIR`` runs the
long soak once and prints its figures as JSON (with the load average when its killed run
ended); ``spark-stream-sched report DIR/samples.jsonl`` plots
them. ``tests/spark/test_soak.py`` runs a smaller one in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.testing.faults import ENV_AT, ENV_ONCE, ENV_PGID

from .. import spark_scratch
from .datagen import make_stream, write_stream
from .soak_samples import figures, kill_times, read_samples

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPERATORS = "join(3, within=2 seconds, budget=4k); running(count(*) as rn)"
N_INPUTS, N_KEYS = 3, 8
SOURCE_CRASHES = ("source.planned", "source.state_written")
SINK_CRASHES = ("sink.state_written", "sink.output_written", "sink.marker_written")


@dataclass(frozen=True)
class Soak:
    """One soak: ``mode`` (``source`` or ``sink``), its size and how often it is killed.

    ``keep_metrics`` is the query's ``keepMetrics``: the location stops growing after that
    many batches (the sink keeps as many commit markers).
    """

    mode: str
    batches: int
    kill_every: int
    rows_per_batch: int = 30
    work: Path = field(default=Path("soak"))
    keep_metrics: int = 20

    @property
    def state(self) -> Path:
        return self.work / "state"

    @property
    def samples(self) -> Path:
        return self.work / "samples.jsonl"


# -- inputs and options ------------------------------------------------------------------------


def write_inputs(soak: Soak) -> list[pa.Table]:
    """Three inputs of ``batches * rows_per_batch`` rows in all, 8 keys, a row every ~0.5 s.

    The source reads 20 files per input, ``rows_per_batch`` rows per batch; the sink's file
    streams take one file of every input per batch, so each input has one file per batch
    (with increasing modification times: Spark admits files in that order).
    """
    per_input = soak.batches * soak.rows_per_batch // N_INPUTS
    tables = [make_stream(17, j, per_input, n_keys=N_KEYS, ts_step_ms=1000)
              for j in range(N_INPUTS)]
    for j, table in enumerate(tables):
        directory = soak.work / "in" / f"in{j}"
        if soak.mode == "source":
            write_stream(table, str(directory), 20)
            continue
        directory.mkdir(parents=True, exist_ok=True)
        step = soak.rows_per_batch // N_INPUTS
        for k in range(soak.batches):
            path = directory / f"part-{k:06d}.parquet"
            pq.write_table(table.slice(k * step, step), path)
            os.utime(path, (1_000_000 + k, 1_000_000 + k))
    return tables


def options(soak: Soak, state: Path) -> dict[str, str]:
    common = {"keyColumns": "meter", "operators": OPERATORS, "partitionGroups": "4",
              "keepMetrics": str(soak.keep_metrics), "stateLocation": str(state)}
    if soak.mode == "source":
        return {**common, "inputs": ",".join(str(soak.work / "in" / f"in{j}")
                                             for j in range(N_INPUTS)),
                "endOfInput": "availableNow", "numPartitions": "2",
                "maxRecordsPerTrigger": str(soak.rows_per_batch)}
    from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN

    return {**common, "path": str(soak.work / "out"), "inputs": str(N_INPUTS),
            "inputColumn": "dc", "sequenceColumn": SEQUENCE_COLUMN, "keepVersions": "3",
            "checkpointLocation": str(soak.work / "ck")}


# -- the killed and restarted run --------------------------------------------------------------


@dataclass
class Run:
    """What the restarted runs did: kills, driver processes, seconds, the last batch seen."""

    kills: int = 0
    processes: int = 0
    seconds: float = 0.0
    last_batch: int = -1


def crash_env(soak: Soak, run: Run) -> dict[str, str]:
    """The crash point of the next kill: ``kill_every`` batches on, cycling the steps.

    None in the last ``kill_every`` batches: the last life is a full one, so that what a kill
    leaves for the retention rules to prune (the killed attempt's state files, kept with their
    version) is pruned before the run ends, and the end shows the steady state.
    """
    target = run.last_batch + soak.kill_every
    if not soak.kill_every or target > soak.batches - soak.kill_every:
        return {}
    steps = SOURCE_CRASHES if soak.mode == "source" else SINK_CRASHES
    step = steps[run.kills % len(steps)]
    if step == "source.planned":  # counts the batches this driver process planned
        where = f"batch={soak.kill_every}"
    elif step == "source.state_written":
        where = f"batch={target},partition=1"
    else:
        where = f"batch={target}"
    return {ENV_AT: f"{step}:{where}", ENV_PGID: "session",
            ENV_ONCE: str(soak.work / f"killed-{run.kills}")}


def scratch_env(soak: Soak) -> dict[str, str]:
    """Temporary files of the killed processes under ``work``, not the machine's ``/tmp``.

    A SIGKILLed JVM leaves its ``spark-*`` and ``blockmgr-*`` directories behind, a killed
    worker its ``join-spill-*`` directory (docs/state_store.md, "Retention", last row).
    """
    return spark_scratch.scratch_env(soak.work / "spark-local", os.environ)


def spill_dirs_left(soak: Soak) -> int:
    """The join's spill directories the killed workers left in their temporary directory."""
    return len(list(spark_scratch.temp_dir(soak.work / "spark-local").glob("join-spill-*")))


def run_killed(soak: Soak, timeout: float = 3600.0) -> Run:
    """Run the driver until its stream ends, restarting it after every kill."""
    job = soak.work / "job.json"
    job.write_text(json.dumps({
        "mode": soak.mode, "options": options(soak, soak.state), "state": str(soak.state),
        "checkpoint": str(soak.work / "ck"), "out": str(soak.work / "out"),
        "samples": str(soak.samples),
        "dirs": [str(soak.work / "in" / f"in{j}") for j in range(N_INPUTS)]}))
    run, started = Run(), time.monotonic()
    while True:
        crash = crash_env(soak, run)
        env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                            "PYTHONPATH": REPO, **scratch_env(soak)} | crash
        driver = subprocess.Popen([sys.executable, "-m", "tests.spark.soak_driver", str(job)],
                                  cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        stdout, stderr = driver.communicate(timeout=timeout)
        run.processes += 1
        seen = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("BATCH")]
        run.last_batch = max([run.last_batch, *seen])
        if driver.returncode == -9 and crash:
            assert Path(crash[ENV_ONCE]).exists(), "killed, but not by the armed crash point"
            run.kills += 1
            continue
        assert driver.returncode == 0, (driver.returncode, stderr[-3000:])
        assert "DONE" in stdout, stderr[-3000:]
        run.seconds = time.monotonic() - started
        return run


# -- the uninterrupted run, in-process ---------------------------------------------------------


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def source_reference(soak: Soak) -> dict[int, list[str]]:
    """Every batch of the same query, uninterrupted: the stream reader in Spark's call order."""
    from pyspark.sql.streaming.datasource import ReadMaxRows

    from spark_stream_sched.spark.datasource import OrderedAggDataSource

    source = OrderedAggDataSource(options(soak, soak.work / "reference-state"))
    reader: Any = source.streamReader(source.schema())
    reader.prepareForTriggerAvailableNow()
    start, previous = reader.initialOffset(), None
    batches: dict[int, list[str]] = {}
    while True:
        end = reader.latestOffset(start, ReadMaxRows(soak.rows_per_batch))
        if end == start:
            return batches
        if previous is not None:
            reader.commit(previous)
        parts = reader.partitions(start, end)
        batches[len(batches)] = canonical([r for p in parts for b in reader.read(p)
                                           for r in b.to_pylist()])
        previous = start = end


def sink_reference(soak: Soak) -> dict[str, list[str]]:
    """Every output file of the same sink query, uninterrupted: its writer with 2 fake tasks."""
    from spark_stream_sched.jobs.runner import SEQUENCE_COLUMN
    from spark_stream_sched.spark import sink

    work = soak.work / "reference"
    opts = {**options(soak, work / "state"), "path": str(work / "out"),
            "checkpointLocation": str(work / "ck")}
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(opts))
    for k in range(soak.batches):
        rows = pa.concat_tables([_positioned(soak, j, k, SEQUENCE_COLUMN)
                                 for j in range(N_INPUTS)])
        messages: list[Any] = []
        for p, part in enumerate((rows.slice(0, rows.num_rows // 2),
                                  rows.slice(rows.num_rows // 2))):
            with mock.patch.object(sink, "_task_identity", return_value=(k, p, 0)):
                messages.append(writer.write(iter(part.to_batches())))
        writer.commit(messages, k)
    sink.finish_sink(opts)
    return sink_outputs(work / "out")


def _positioned(soak: Soak, input_id: int, k: int, column: str) -> pa.Table:
    """File ``k`` of an input as the sink's file stream hands it over (input id, position)."""
    name = f"part-{k:06d}.parquet"
    table = pq.read_table(soak.work / "in" / f"in{input_id}" / name)
    position = [f"{name}#{i:019d}" for i in range(table.num_rows)]
    return (table.append_column("dc", pa.array([input_id] * table.num_rows, pa.int32()))
            .append_column(column, pa.array(position, pa.string())))


def source_outputs(soak: Soak) -> dict[int, list[str]]:
    return {int(p.stem.split("-")[1]): canonical(pq.read_table(p).to_pylist())
            for p in sorted((soak.work / "out").glob("batch-*.parquet"))}


def sink_outputs(out: Path) -> dict[str, list[str]]:
    return {p.name: canonical(pq.read_table(p).to_pylist()) for p in sorted(out.glob("part-*"))}


def equal_to_uninterrupted(soak: Soak, reference: dict[int, list[str]] | None = None) -> bool:
    """Whether the killed run's output is the uninterrupted run's (batch by batch, file by file).

    ``reference``: the source's :func:`source_reference`, if already computed (it is computed
    once per state location).
    """
    if soak.mode == "source":
        return source_outputs(soak) == (source_reference(soak) if reference is None
                                        else reference)
    return sink_outputs(soak.work / "out") == sink_reference(soak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("source", "sink"), default="source")
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--kill-every", type=int, default=100)
    parser.add_argument("--work", type=Path, required=True, help="a directory not yet there")
    args = parser.parse_args()
    soak = Soak(args.mode, args.batches, args.kill_every, work=args.work)
    soak.work.mkdir(parents=True, exist_ok=False)
    write_inputs(soak)
    run = run_killed(soak, timeout=6 * 3600)
    load = os.getloadavg()
    started = time.monotonic()
    equal = equal_to_uninterrupted(soak)
    found = figures(read_samples(soak.samples), kill_times(soak.work))
    print(json.dumps({"mode": soak.mode, "kill_every": soak.kill_every,
                      "driver_processes": run.processes, "seconds": round(run.seconds, 1),
                      "load_average_1_5_15_min": [round(v, 2) for v in load], **found,
                      "spill_dirs_left": spill_dirs_left(soak),
                      "equal_to_uninterrupted": equal,
                      "reference_seconds": round(time.monotonic() - started, 1)}, indent=1))


if __name__ == "__main__":
    main()
