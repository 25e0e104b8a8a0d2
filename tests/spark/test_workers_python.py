"""A user's own builder: what the first line says when Spark's Python workers lack the package.

Each test runs a driver script in a fresh process with the venv's interpreter, no
``PYSPARK_PYTHON``, and a ``PATH`` whose ``python3`` is the venv's base interpreter (which has
neither this package nor pyarrow): the situation of ``.venv/bin/python job.py`` run without an
activated venv. Spark's workers then run that ``python3``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
from pyspark.sql import SparkSession
from_user = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
if sys.argv[1] == "configure":
    from spark_stream_sched.spark import configure
    from_user = configure(from_user)
spark = from_user.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
if sys.argv[1] == "register":
    from spark_stream_sched.spark import register
    register(spark)
rows = (spark.read.format("ordered-agg").option("inputs", sys.argv[2])
        .option("window", "1 minute").option("aggregates", "count(*) as n").load().collect())
print("windows", len(rows))
"""


def run_driver(tmp_path: Path, how: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys._base_executable)  # type: ignore[attr-defined]
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"ts": [0, 1_000, 61_000]}), tmp_path / "in" / "part-0.parquet")
    (tmp_path / "job.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join([str(tmp_path / "bin"), env.get("PATH", "")])
    return subprocess.run([sys.executable, str(tmp_path / "job.py"), how, str(tmp_path / "in")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The exception's lines: what follows the traceback's last ``File ...`` frame."""
    lines = done.stderr.splitlines()
    last_frame = max(i for i, line in enumerate(lines) if line.startswith("  File "))
    return [line for line in lines[last_frame + 1:] if not line.startswith((" ", "\t"))]


def test_the_base_interpreter_really_lacks_the_package() -> None:
    from spark_stream_sched.interpreters import lacking

    assert lacking(sys._base_executable) is not None  # type: ignore[attr-defined]
    assert lacking(sys.executable) is None


@pytest.mark.slow
def test_a_plain_builder_fails_with_the_first_lines_troubleshooting_documents(
        tmp_path: Path) -> None:
    done = run_driver(tmp_path, "plain")
    assert done.returncode != 0
    first, second = error_lines(done)[:2]
    assert first.startswith("py4j.protocol.Py4JJavaError: An error occurred while calling o")
    assert first.endswith(".load.")
    assert "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: ordered-agg." in second
    readme = (REPO / "README.md").read_text()
    assert "Py4JJavaError: An error occurred while calling o" in readme
    assert "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: ordered-agg" in readme


def test_register_names_the_workers_interpreter_and_the_fix(tmp_path: Path) -> None:
    done = run_driver(tmp_path, "register")
    assert done.returncode != 0
    first = error_lines(done)[0]
    assert first.startswith("spark_stream_sched.errors.ConfigError: Spark's Python workers run "
                            "python3 from PATH (spark.pyspark.python and PYSPARK_PYTHON are "
                            "unset), which cannot run the ordered-agg plugin (")
    assert f"start the session with spark.pyspark.python={sys.executable}" in first


@pytest.mark.slow
def test_configure_on_the_users_builder_makes_it_work(tmp_path: Path) -> None:
    done = run_driver(tmp_path, "configure")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "windows 2" in done.stdout  # [0, 60 s) and [60 s, 120 s)
