"""``ordered(...)`` in applyInPandasWithState on a real cluster, losing a worker mid-query.

A driver subprocess (``transform_driver.py``) runs ``ordered(...).window(...).agg(...)`` over
three Parquet file streams (``maxFilesPerTrigger=1``: several micro-batches) on the standalone
master + 2 workers, state in RocksDB on the executors, checkpoint and data on the local
filesystem both workers share. After the first committed batch the test SIGKILLs worker 0 (its
JVM and its executor). The query must still end, with output equal to the reference oracle on
the same inputs (each (window, key) once, nothing lost), and the checkpoint must hold the
RocksDB provider's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.spark.transform import ROCKSDB_PROVIDER
from spark_stream_sched.testing.reference import reference_aggregate
from tests.spark.datagen import make_stream
from tests.spark.helpers import assert_matches_oracle, output_key

from .transform_driver import AGGREGATES, SHUFFLE_PARTITIONS, SLIDE, WINDOW

pytestmark = pytest.mark.cluster
DRIVER = Path(__file__).resolve().parent / "transform_driver.py"
REPO = Path(__file__).resolve().parents[1]
N_INPUTS = 3


def write_inputs(root: Path, rows: int = 240, files: int = 4) -> list[pa.Table]:
    """Input ``j`` in ``files + j`` Parquet files plus a last file with its end-of-input row.

    Columns: the generated stream, ``pos`` (the sequence) and ``eof``. Modification times
    increase in stream order (Spark's file source takes files by modification time).
    """
    tables = [make_stream(11, j, rows + 31 * j) for j in range(N_INPUTS)]
    mtime = 1_700_000_000
    for j, table in enumerate(tables):
        n, k = table.num_rows, files + j
        full = table.append_column("pos", pa.array(range(n), pa.int64()))
        full = full.append_column("eof", pa.array([False] * n))
        parts = [full.slice(i * n // k, (i + 1) * n // k - i * n // k) for i in range(k)]
        parts.append(full.slice(n - 1, 1).set_column(
            full.schema.get_field_index("eof"), "eof", pa.array([True])))
        directory = root / f"in{j}"
        directory.mkdir()
        for i, part in enumerate(parts):
            path = directory / f"part-{i:04d}.parquet"
            pq.write_table(part, path)
            mtime += 10
            os.utime(path, (mtime, mtime))
    return tables


def start_driver(cluster: Any, root: Path) -> subprocess.Popen[bytes]:
    log = (root / "driver.log").open("wb")
    env = cluster.env() | {"PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, str(DRIVER), cluster.url, str(root), str(N_INPUTS)],
                            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)


def committed(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if (
        commits.is_dir()) else []


def executor_tasks(worker_dir: Path, root: Path) -> int:
    """Tasks that this driver's executors on the worker started (``Running task`` in logs)."""
    app = (root / "application-id").read_text().strip()
    return sum(path.read_text(errors="replace").count("Running task")
               for path in worker_dir.glob(f"{app}/*/stderr"))


def driver_log(root: Path) -> str:
    return (root / "driver.log").read_text(errors="replace")[-4000:]


def test_ordered_on_a_cluster_losing_a_worker_equals_the_oracle(cluster: Any,
                                                                tmp_path: Path) -> None:
    if not hasattr(cluster, "root"):  # only StandaloneCluster runs drivers on this host
        pytest.skip("compose: the driver is a host subprocess started from this venv, and the "
                    "compose cluster's executors run the image's Python; only spark-submit of "
                    "ordered_agg_job.py is wired through the compose `job` service")
    root = cluster.job_dir(tmp_path.name)
    tables = write_inputs(root)
    checkpoint = root / "checkpoint"
    proc = start_driver(cluster, root)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not committed(checkpoint):
            time.sleep(0.2)
        assert proc.poll() is None, f"the driver ended before a worker was killed:\n" \
                                    f"{driver_log(root)}"
        assert committed(checkpoint), f"no batch committed in 180 s:\n{driver_log(root)}"
        # (d) both workers run an executor and have run tasks before the kill
        assert cluster.cores_used(0) == 1, "worker 0 runs no executor; killing it proves nothing"
        assert cluster.cores_used(1) == 1, "worker 1 runs no executor"
        tasks_before = [executor_tasks(cluster.root / f"worker-{i}", root) for i in range(2)]
        assert all(n > 0 for n in tasks_before), tasks_before
        commits_at_kill = len(committed(checkpoint))
        cluster.kill_worker(0)
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"query did not finish within 240 s of the kill:\n{driver_log(root)}")
        # (a) the query finished, on the surviving worker, after the kill
        assert proc.returncode == 0, driver_log(root)
        log = (root / "driver.log").read_text(errors="replace")
        assert "DONE" in log, log[-4000:]
        assert "Lost executor" in log, "the driver never saw the executor of worker 0 go"
        commits = committed(checkpoint)
        assert commits == list(range(len(commits)))
        assert len(commits) > commits_at_kill, "no batch committed after the worker was lost"
        assert executor_tasks(cluster.root / "worker-1", root) > tasks_before[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if cluster.workers[0].poll() is not None:  # killed: back for the session's next tests
            cluster.restart_worker(0)

    # (b) the output equals the oracle: every (window, key) once, nothing lost, same values
    batches = sorted((root / "output").glob("batch-*.parquet"))
    assert [int(p.stem.split("-")[1]) for p in batches] == commits
    rows = pa.concat_tables([pq.read_table(p) for p in batches]).to_pylist()
    expected = reference_aggregate(tables, WindowSpec.parse(WINDOW, SLIDE), ["meter"],
                                   list(AGGREGATES))
    assert len(expected) > 50
    assert [output_key(r) for r in expected] == sorted(output_key(r) for r in expected)
    assert sum(1 for p in batches if pq.read_metadata(p).num_rows) > 1  # spread over batches
    assert len({output_key(r) for r in rows}) == len(rows), "a (window, key) was emitted twice"
    # windows leave in (window_end, window_start, key) order across batches
    assert [output_key(r) for r in rows] == sorted(output_key(r) for r in rows)
    assert_matches_oracle(rows, expected)

    # (c) the state lived in RocksDB: the provider recorded in the offset log, Spark's
    # state-metadata names the operator, and the state directories hold RocksDB's files
    offsets = (checkpoint / "offsets" / "0").read_text().splitlines()
    conf = json.loads(offsets[1])["conf"]
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    metadata = json.loads((root / "state-metadata.json").read_text())
    assert [m["operatorName"] for m in metadata] == ["applyInPandasWithState"]
    assert metadata[0]["numPartitions"] == SHUFFLE_PARTITIONS
    state = checkpoint / "state" / "0"
    partitions = sorted(p.name for p in state.iterdir() if p.name.isdigit())
    assert partitions == [str(i) for i in range(SHUFFLE_PARTITIONS)]
    for partition in partitions:
        names = [p.name for p in (state / partition).rglob("*") if p.is_file()]
        assert any(n.endswith((".zip", ".changelog")) for n in names), (partition, names)
        assert not any(n.endswith((".delta", ".snapshot")) for n in names), (partition, names)
    assert list(state.glob("*/SSTs/*.sst")), "no RocksDB SST file in the checkpoint"
