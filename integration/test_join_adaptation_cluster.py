"""Distributed adaptation on a real cluster: partition groups move between executors.

A driver subprocess (``join_adaptation_driver.py``) runs ``join(3, within=15 seconds)`` through
``readStream.format("ordered-agg")`` with ``adaptation=lazy-disk`` and ``thetaD=1`` on the
standalone master + 2 workers (one 1-core executor each, so the two tasks of a micro-batch run on
different executors), state under a directory both executors share. The driver's distribution
manager moves groups between the tasks at batch boundaries (Liu & Rundensteiner 2005, §5); a group
whose task lands on the other executor is loaded there from its checkpointed version file (the first
executor's in-memory cache is of no use). The test shows recorded moves whose source and target
tasks ran on different executors, and the output equal to the batch join oracle.

Spark shuffles resource offers, so which executor runs task 0 of a batch is random: a move
crosses executors with probability 1/2. The workload makes about 14 batches with a move, so the
check that at least one crossed fails by chance with probability about 2**-14.
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
from spark_stream_sched.testing.pipeline_reference import reference_pipeline
from tests.spark.datagen import make_stream, write_stream

pytestmark = pytest.mark.cluster
DRIVER = Path(__file__).resolve().parent / "join_adaptation_driver.py"
REPO = Path(__file__).resolve().parents[1]
JOIN = {"keyColumns": "meter", "operators": "join(3, within=15 seconds)"}


def write_job(root: Path) -> list[Any]:
    tables = [make_stream(5, j, 400 + 20 * j, n_keys=20) for j in range(3)]
    for j, table in enumerate(tables):
        write_stream(table, str(root / f"in{j}"), 4)
    options = {"inputs": ",".join(str(root / f"in{j}") for j in range(3)),
               "stateLocation": str(root / "state"), "endOfInput": "availableNow",
               "partitionGroups": "32", "numPartitions": "2", "maxRecordsPerTrigger": "60",
               "adaptation": "lazy-disk", "thetaD": "1.0", **JOIN}
    (root / "options.json").write_text(json.dumps(options), encoding="utf-8")
    return tables


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def executor_of(worker: str) -> str:
    """The executor directory (``<worker dir>/<app id>/<executor id>``) of a metrics worker."""
    return worker.split(":", 2)[2]


def test_groups_move_between_executors_and_the_join_equals_the_oracle(cluster: Any,
                                                                      tmp_path: Path) -> None:
    if not hasattr(cluster, "root"):
        pytest.skip("compose: the driver is a host subprocess started from this venv; only "
                    "spark-submit of ordered_agg_job.py is wired through the compose service")
    root = cluster.job_dir(tmp_path.name)
    tables = write_job(root)
    log = (root / "driver.log").open("wb")
    env = cluster.env() | {"PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(DRIVER), cluster.url, str(root)], cwd=root,
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = (root / "driver.log").read_text(errors="replace")
    assert proc.returncode == 0, text[-4000:]
    assert "DONE" in text

    # the result is the batch oracle's: no duplicate, no loss
    outputs = sorted((root / "output").glob("batch-*.parquet"))
    rows = [r for p in outputs for r in pq.read_table(p).to_pylist()]
    oracle = canonical(reference_pipeline(tables, spec_from_options(JOIN, 3)))
    assert len(oracle) > 1000
    assert canonical(rows) == oracle

    # where each task ran, batch by batch, and which groups it ran
    state = str(root / "state")
    batches = {b["version"]: b for b in batch_metrics.read_batches(state)}
    records = [r for v in assignments.recorded_versions(state)
               if (r := assignments.read_assignment(state, v)) is not None]
    assert [r.version for r in records] == sorted(batches)
    app = (root / "application-id").read_text().strip()
    executors = {executor_of(w) for b in batches.values() for w in b["workers"].values()}
    assert len(executors) == 2, executors
    assert all(Path(e).parent.name == app and Path(e).parent.parent.parent == cluster.root
               for e in executors), executors
    for record in records:  # the tasks ran the recorded groups
        ran = batches[record.version]["assignment"]
        assert ran == {str(t): list(record.groups_of(t)) for t in range(record.tasks)}

    crossed, moves = [], 0
    for before, after in zip(records, records[1:], strict=False):
        for group, source, target, size in after.moves:
            moves += 1
            was = executor_of(batches[before.version]["workers"][str(source)])
            now = executor_of(batches[after.version]["workers"][str(target)])
            if was != now:
                crossed.append((group, Path(was).name, Path(now).name, size))
    assert moves >= 8, f"only {moves} moves"
    assert crossed, "no moved group changed executor"
    print(f"\n{len(records)} batches, {moves} moves, {len(crossed)} across executors "
          f"(group, from executor, to executor, bytes): {crossed[:6]}")
    assert os.path.isdir(state)
