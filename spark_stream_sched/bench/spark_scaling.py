"""Scaling with executor cores: ``ordered(...)``, the sink and their floor on 1 and 2 cores.

Each master runs in a process of its own (``python -m spark_stream_sched.bench.spark_scaling``:
its own JVM and Spark session) on the main case's files, with the same settings, among them
``spark.sql.shuffle.partitions`` = 2: the work is cut into the same tasks and only the cores
that run them differ. The child runs the engines round after round, ``warmup`` untimed rounds
then ``runs`` timed ones (as :mod:`.spark_cases`), and prints one JSON line per run; this
process checks every run's output against the truth and reports, per engine and core count, the
median wall time and ``cores_speedup`` = median on the fewest cores / this median.
``floor-python`` (Spark handing the same rows to a Python function that does nothing) shows how
much a second core gives Spark's own Python path on this machine.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spark_stream_sched.bench.spark_cases import cpu_by_role, measured_run, ratio, sink_counters
from spark_stream_sched.bench.spark_data import Truth, Workload, matches, result_rows
from spark_stream_sched.bench.spark_floor import NO_OUTPUT
from spark_stream_sched.errors import SparkStreamSchedError

#: Engines whose scaling is measured (issue 10: the transformation and the sink; their floor).
SCALING_ENGINES = ("transform", "ordered-agg-sink", "floor-python")
#: Prefix of the child's result lines on stdout (Spark's Python workers print there too).
_LINE = "bench-spark-run "
Record = dict[str, Any]


def run_scaling(root: Path, work: Workload, truth: Truth, engines: Sequence[str],
                cores: Sequence[int], runs: int, files: int, bar: Any,
                warmup: int = 0) -> list[Record]:
    """Run ``engines`` on ``local[n]`` for each ``n`` in ``cores`` (module doc)."""
    rows = []
    for n in cores:
        bar.set_description(f"bench spark cores local[{n}]")
        records: dict[str, list[Record]] = {engine: [] for engine in engines}
        rounds = {"runs": runs, "warmup": warmup, "files": files}
        for record in _child_runs(root / f"local-{n}", work, engines, rounds, n):
            records[record["engine"]].append(record)
            bar.update(1)
        rows += [_summary(engine, n, work, records[engine], truth) for engine in engines]
    fewest = {r["engine"]: r["seconds_median"] for r in rows if r["cores"] == min(cores)}
    for r in rows:
        r["cores_speedup"] = ratio(fewest[r["engine"]], r["seconds_median"])
    return rows


def _summary(engine: str, cores: int, work: Workload, records: list[Record],
             truth: Truth) -> Record:
    """One engine on one master: timed runs only, but every run checked against the truth."""
    timed = [r for r in records if not r["warmup"]]
    seconds = [r["seconds"] for r in timed]
    cpu = cpu_by_role(timed)
    return {"bench": "spark", "case": "cores", "engine": engine, "cores": cores,
            "master": f"local[{cores}]", "rows": work.rows, "inputs": work.n_inputs,
            "keys": work.keys, "runs": len(seconds), "warmup": len(records) - len(timed),
            "seconds": [round(s, 2) for s in seconds],
            "seconds_median": round(statistics.median(seconds), 3),
            "micro_batches": timed[-1]["micro_batches"],
            "load_1m": [r["load_1m"] for r in timed],
            "matches_truth": None if engine in NO_OUTPUT else all(
                matches(result_rows(Path(r["out"])), truth) for r in records),
            # cores the run kept busy: how much of local[n] the shared machine gave it
            "cores_busy": round(cpu["cpu_total_s"] / statistics.mean(seconds), 2),
            **cpu, **sink_counters(timed)}


def _child_runs(root: Path, work: Workload, engines: Sequence[str], rounds: dict[str, int],
                cores: int) -> Iterator[Record]:
    """Start the child for ``local[cores]``; yield its records as they arrive.

    ``rounds``: ``runs``, ``warmup`` and ``files`` (per input per micro-batch).

    Raises
    ------
    SparkStreamSchedError
        The child failed; the message names its log (the child's stderr).
    """
    root.mkdir(parents=True, exist_ok=True)
    spec = {"work": work.to_json(), "engines": list(engines), **rounds,
            "master": f"local[{cores}]", "root": str(root)}
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
        raise SparkStreamSchedError(f"bench spark: the local[{cores}] run failed (exit "
                                    f"{child.returncode}); see {log}: {' | '.join(tail)}")


def main(argv: Sequence[str] | None = None) -> int:
    """The child: run the engines on one master and print a result line per run."""
    from spark_stream_sched.bench.spark_native import run_engine
    from spark_stream_sched.spark import embedded

    parser = argparse.ArgumentParser(prog="spark_scaling", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="JSON: work, engines, runs, warmup, files, master, root")
    spec = json.loads(parser.parse_args(argv).spec)
    work, root = Workload.from_json(spec["work"]), Path(spec["root"])
    spark = embedded.get_spark(master=spec["master"])
    for i in range(spec["warmup"] + spec["runs"]):
        for engine in spec["engines"]:
            out = root / f"{engine}-{i}"
            record = measured_run(functools.partial(run_engine, spark, engine, work, out,
                                                    spec["files"], None), out)
            print(_LINE + json.dumps({**record, "engine": engine, "out": str(out),
                                      "warmup": i < spec["warmup"]}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
