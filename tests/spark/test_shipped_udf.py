"""A ``udf`` module shipped with ``spark-submit --py-files``, through the source.

pyspark 4.3's streaming source runner (the driver-side Python worker of the stream reader) gets
``<SparkFiles root>/streaming_job`` as its files directory, where Spark never copies shipped
files (``spark/shipped_files.py``); before the fix the query failed at its start with
``cannot import 'shipped_total:total': no Python source of module 'shipped_total' ...``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.spark.shipped_files import STREAMING_JOB, shipped_paths

REPO = Path(__file__).resolve().parents[2]
MODULE = '''
import pyarrow as pa
from spark_stream_sched.runtime.keyed.user import keyed_function


@keyed_function(output_schema=pa.schema([("total", pa.float64())]),
                initial_state={"total": 0.0})
def total(key, rows, state):
    out = []
    for v in rows.column("v").to_pylist():
        state["total"] += v
        out.append(state["total"])
    return pa.table({"total": pa.array(out, pa.float64()),
                     "__row": pa.array(range(rows.num_rows), pa.int64())})
'''


def _inputs(work: Path) -> list[tuple[int, int, int, str, float]]:
    """Two inputs of 8 rows each; ``(ts, input, seq, k, v)`` of every row."""
    rows = []
    for i in range(2):
        ts = [700 * j + 300 * i for j in range(8)]
        keys = ["a", "b", "b", "a"] * 2
        values = [float(10 * i + j) for j in range(8)]
        (work / f"in{i}").mkdir(parents=True)
        pq.write_table(pa.table({"ts": pa.array(ts, pa.int64()), "k": keys, "v": values}),
                       work / f"in{i}" / "part-0.parquet")
        rows += [(t, i, j, k, v) for j, (t, k, v) in enumerate(zip(ts, keys, values, strict=True))]
    return rows


def _oracle(rows: list[tuple[int, int, int, str, float]]) -> list[list[object]]:
    """Running total of ``v`` per key in the total order ``(ts, input, seq)``."""
    totals: dict[str, float] = {}
    out = []
    for ts, _, _, k, v in sorted(rows):
        totals[k] = totals.get(k, 0.0) + v
        out.append([ts, k, totals[k]])
    return sorted(out, key=lambda r: (r[0], r[1]))


@pytest.mark.spark
@pytest.mark.slow
def test_udf_module_shipped_with_py_files_runs_in_the_source(tmp_path: Path) -> None:
    work, ship = tmp_path / "work", tmp_path / "ship"
    ship.mkdir()
    (ship / "shipped_total.py").write_text(MODULE)
    expected = _oracle(_inputs(work))
    import pyspark

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
               "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.local.dir={tmp_path / 'local'}",
               "--conf", f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}",
               "--driver-java-options", f"-Djava.io.tmpdir={tmp_path}",
               "--py-files", str(ship / "shipped_total.py"),
               str(REPO / "tests" / "spark" / "shipped_udf_driver.py"), str(work),
               "shipped_total:total"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines, done.stdout[-3000:]
    assert json.loads(lines[0].removeprefix("RESULT ")) == expected


def test_shipped_paths_point_the_streaming_runner_at_the_session_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = tmp_path / "userFiles-1"
    root = session / STREAMING_JOB
    root.mkdir(parents=True)
    for name in ("deps.zip", "tool.egg", "notes.txt", "mod.py"):
        (session / name).write_text("")
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(root), str(root / "told.zip")])
    assert shipped_paths(str(root)) == [str(session), str(session / "told.zip"),
                                        str(session / "deps.zip"), str(session / "tool.egg")]
    assert shipped_paths(str(session)) == []  # every other worker already has its root
