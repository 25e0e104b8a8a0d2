"""Scaling with executor cores: every engine that can scale on 1 and 2 cores, and on a cluster.

Each master runs in a process of its own (``python -m spark_stream_sched.bench.spark_scaling``:
its own JVM and Spark session) on the main case's files, with the same settings, among them
``spark.sql.shuffle.partitions`` = 2: the work is cut into the same tasks and only the cores
that run them differ. The child runs the engines round after round, ``warmup`` untimed rounds
then ``runs`` timed ones (as :mod:`.spark_cases`), and prints one JSON line per run; this
process checks every run's output against the truth and reports, per engine and core count, the
median wall time, ``cores_speedup`` = median on the fewest cores / this median, and Spark's
task metrics (:mod:`.spark_stages`), which the model of :mod:`.spark_model` projects from.
``floor-python`` (Spark handing the same rows to a Python function that does nothing) shows how
much a second core gives Spark's own Python path on this machine.

:func:`run_cluster` runs the same child against a running standalone master (``--cluster``):
the measured point the model's projection is compared with. Its executors are not processes
of this machine's bench, so its ``/proc`` CPU figures are the driver's side only.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spark_stream_sched.bench.spark_cases import (
    cpu_by_role,
    measured_run,
    ratio,
    sink_counters,
    stage_summary,
)
from spark_stream_sched.bench.spark_data import Truth, Workload, matches, result_rows
from spark_stream_sched.bench.spark_floor import NO_OUTPUT
from spark_stream_sched.errors import SparkStreamSchedError

#: Engines whose scaling is measured: the ones that should scale with cores (the source, the
#: transformation, the sink), their floor, and the native peers they are compared with.
SCALING_ENGINES = ("native", "native-minby", "ordered-agg", "ordered-agg-driver", "transform",
                   "ordered-agg-sink", "floor-python")
#: Engines of the cluster point: ours that scale.
CLUSTER_ENGINES = ("ordered-agg", "ordered-agg-driver", "transform", "ordered-agg-sink")
#: Prefix of the child's result lines on stdout (Spark's Python workers print there too).
_LINE = "bench-spark-run "
#: Seconds the child waits for a cluster's executors to register.
EXECUTORS_TIMEOUT = 120.0
Record = dict[str, Any]


def run_scaling(root: Path, work: Workload, truth: Truth, engines: Sequence[str],
                cores: Sequence[int], runs: int, files: int, bar: Any,
                warmup: int = 0) -> list[Record]:
    """Run ``engines`` on ``local[n]`` for each ``n`` in ``cores`` (module doc)."""
    rows = []
    rounds = {"runs": runs, "warmup": warmup, "files": files}
    for n in cores:
        rows += _run_master(root / f"local-{n}", work, truth, engines, f"local[{n}]", n, rounds,
                            bar, "cores")
    fewest = {r["engine"]: r["seconds_median"] for r in rows if r["cores"] == min(cores)}
    for r in rows:
        r["cores_speedup"] = ratio(fewest[r["engine"]], r["seconds_median"])
    return rows


def run_cluster(root: Path, work: Workload, truth: Truth, engines: Sequence[str], master: str,
                cores: int, runs: int, files: int, bar: Any, warmup: int = 0) -> list[Record]:
    """Run ``engines`` on the standalone ``master``, with ``cores`` executor cores in all.

    The child asks for ``cores`` cores (``spark.cores.max``, 512 MiB per executor) and waits
    until executors holding that many have registered.
    """
    rounds = {"runs": runs, "warmup": warmup, "files": files}
    return _run_master(root / "cluster", work, truth, engines, master, cores, rounds, bar,
                       "cluster")


def _run_master(root: Path, work: Workload, truth: Truth, engines: Sequence[str], master: str,
                cores: int, rounds: dict[str, int], bar: Any, case: str) -> list[Record]:
    """Every engine's runs on one master, summarised per engine."""
    bar.set_description(f"bench spark {case} {master}")
    records: dict[str, list[Record]] = {engine: [] for engine in engines}
    for record in _child_runs(root, work, engines, rounds, master, cores):
        records[record["engine"]].append(record)
        bar.update(1)
    return [_summary(engine, case, master, cores, work, records[engine], truth)
            for engine in engines]


def _summary(engine: str, case: str, master: str, cores: int, work: Workload,
             records: list[Record], truth: Truth) -> Record:
    """One engine on one master: timed runs only, but every run checked against the truth."""
    timed = [r for r in records if not r["warmup"]]
    seconds = [r["seconds"] for r in timed]
    cpu = cpu_by_role(timed)
    return {"bench": "spark", "case": case, "engine": engine, "cores": cores,
            "master": master, "rows": work.rows, "inputs": work.n_inputs,
            "keys": work.keys, "runs": len(seconds), "warmup": len(records) - len(timed),
            "seconds": [round(s, 2) for s in seconds],
            "seconds_median": round(statistics.median(seconds), 3),
            "rows_per_s_median": round(work.rows / statistics.median(seconds)),
            "micro_batches": timed[-1]["micro_batches"],
            "load_1m": [r["load_1m"] for r in timed],
            "matches_truth": None if engine in NO_OUTPUT else all(
                matches(result_rows(Path(r["out"])), truth) for r in records),
            # cores the run kept busy: how much of local[n] the shared machine gave it, CPU
            # seconds per wall second of the window they were sampled over (which also holds
            # the query's planning before ``seconds`` starts); a cluster's executors are not
            # sampled
            "cores_busy": round(cpu["cpu_total_s"]
                                / statistics.mean(r["cpu_wall_s"] for r in timed), 2)
            if case == "cores" else None,
            **cpu, **sink_counters(timed), **stage_summary(timed, work.rows, cores)}


def _child_runs(root: Path, work: Workload, engines: Sequence[str], rounds: dict[str, int],
                master: str, cores: int) -> Iterator[Record]:
    """Start the child for ``master`` (``cores`` executor cores); yield its records.

    ``rounds``: ``runs``, ``warmup`` and ``files`` (per input per micro-batch).

    Raises
    ------
    SparkStreamSchedError
        The child failed; the message names its log (the child's stderr).
    """
    root.mkdir(parents=True, exist_ok=True)
    spec = {"work": work.to_json(), "engines": list(engines), **rounds,
            "master": master, "cores": cores, "root": str(root)}
    log = root / "child-stderr.log"
    command = [sys.executable, "-m", "spark_stream_sched.bench.spark_scaling", json.dumps(spec)]
    with open(log, "w", encoding="utf-8") as err, subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith(_LINE):
                yield json.loads(line[len(_LINE):])
    if child.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
        raise SparkStreamSchedError(f"bench spark: the {master} run failed (exit "
                                    f"{child.returncode}); see {log}: {' | '.join(tail)}")


def main(argv: Sequence[str] | None = None) -> int:
    """The child: run the engines on one master and print a result line per run."""
    from spark_stream_sched.bench.spark_native import run_engine
    from spark_stream_sched.bench.spark_stages import SETTINGS
    from spark_stream_sched.spark import embedded

    parser = argparse.ArgumentParser(prog="spark_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="JSON: work, engines, runs, warmup, files, master, cores, "
                                     "root")
    spec = json.loads(parser.parse_args(argv).spec)
    work, root, master = Workload.from_json(spec["work"]), Path(spec["root"]), spec["master"]
    _ = work.schema  # missing input files fail here, before a JVM starts
    cluster = () if master.startswith("local") else (
        ("spark.cores.max", str(spec["cores"])), ("spark.executor.memory", "512m"))
    spark = embedded.get_spark(master=master, settings=(*SETTINGS, *cluster))
    if cluster:
        _wait_for_executors(spark, spec["cores"])
    for i in range(spec["warmup"] + spec["runs"]):
        for engine in spec["engines"]:
            out = root / f"{engine}-{i}"
            record = measured_run(functools.partial(run_engine, spark, engine, work, out,
                                                    spec["files"], None), out)
            print(_LINE + json.dumps({**record, "engine": engine, "out": str(out),
                                      "warmup": i < spec["warmup"]}), flush=True)
    spark.stop()
    return 0


def _wait_for_executors(spark: Any, cores: int) -> None:
    """Wait until executors holding ``cores`` cores have registered with the driver."""
    from spark_stream_sched.bench.spark_stages import executor_cores

    deadline = time.monotonic() + EXECUTORS_TIMEOUT
    while executor_cores(spark) < cores:
        if time.monotonic() > deadline:
            raise SparkStreamSchedError(
                f"bench spark: executors with {cores} cores did not register within "
                f"{EXECUTORS_TIMEOUT:.0f} s; check that the master has {cores} free cores")
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
