"""A session from ``session()`` keeps pyspark's worker chatter off the console.

pyspark's driver-side ``transformWithStateInPandas`` worker (``ordered()`` runs on another
operator; the benchmark's ``floor-tws`` and users' own queries run on this one) prints
"Starting Streaming TransformWithStateInPandas Python worker." and four more lines at each
query start, which Spark
copies to the driver's stderr; ``session()`` silences that worker's stdout through the
``sitecustomize`` of ``spark_stream_sched/spark/worker_site``. The Spark test runs a script in a
child process with a plain environment, as a user would, and reads what it printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_stream_sched.spark.embedded import WORKER_SITE, quiet_python_workers

from .test_transform import write_files

CHATTER = "TransformWithStateInPandas Python worker"
DRIVER_WORKER = "pyspark.sql.streaming.transform_with_state_driver_worker"

SCRIPT = """
import sys
import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import LongType, StructField, StructType
from spark_stream_sched.spark import configure, session


class Count(StatefulProcessor):
    def init(self, handle):
        pass

    def handleInputRows(self, key, rows, timerValues):
        yield pd.DataFrame({"n": [sum(len(frame) for frame in rows)]})

    def close(self):
        pass


root, checkpoint = sys.argv[1:3]
spark = session("local[2]")
configure(spark)
schema = spark.read.parquet(f"{root}/in0").schema
counts = []
(spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(f"{root}/in0")
 .groupBy("meter")
 .transformWithStateInPandas(Count(), StructType([StructField("n", LongType())]), "Append", "None")
 .writeStream.foreachBatch(lambda df, batch_id: counts.append(
     df.groupBy().sum("n").collect()[0][0] or 0))
 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
 .awaitTermination())
print("ROWS", sum(counts), "BATCHES", len(counts))
"""


def plain_env() -> dict[str, str]:
    """What a user's shell gives: no PYSPARK_PYTHON, no SPARK_CONF_DIR, no PYTHONPATH."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8"}
    return env | ({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {})


@pytest.mark.slow
@pytest.mark.spark
def test_a_transform_with_state_query_started_through_session_prints_no_worker_chatter(
        tmp_path: Path) -> None:
    tables = write_files(str(tmp_path / "in"), rows=60, files=2, end_marker=False)
    script = tmp_path / "job.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "in"),
                           str(tmp_path / "ck")], cwd=tmp_path, env=plain_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    console = done.stdout + done.stderr
    assert done.returncode == 0, console[-3000:]
    rows, batches = (int(w) for w in done.stdout.split()[-3::2])
    assert rows == tables[0].num_rows  # the query did run to the end
    assert batches > 1
    assert CHATTER not in console


def run_python(code: str, *argv: str, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    """``python -c code argv...`` with ``pythonpath`` as its PYTHONPATH."""
    env = plain_env() | {"PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True,
                          text=True, timeout=60, check=True)


def test_only_the_driver_worker_loses_its_stdout() -> None:
    code = "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"
    driver = run_python(code, DRIVER_WORKER, pythonpath=[WORKER_SITE])
    assert (driver.stdout, driver.stderr) == ("", "to stderr\n")
    other = run_python(code, "pyspark.daemon", pythonpath=[WORKER_SITE])
    assert (other.stdout, other.stderr) == ("to stdout\n", "to stderr\n")


def test_the_sitecustomize_it_hides_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import sys; print('site ran', file=sys.stderr)")
    done = run_python("print('main ran')", pythonpath=[WORKER_SITE, tmp_path])
    assert (done.stdout, done.stderr) == ("main ran\n", "site ran\n")


class _Context:
    def __init__(self, environment: dict[str, str]) -> None:
        self.environment = environment


class _Session:
    def __init__(self, environment: dict[str, str]) -> None:
        self.sparkContext = _Context(environment)


class _ConnectSession:
    def __getattr__(self, name: str) -> object:
        raise AttributeError(f"{name} is not supported in Spark Connect")


def test_the_worker_site_goes_first_once_keeping_what_was_there() -> None:
    environment = {"PYTHONPATH": os.pathsep.join(["/opt/libs", "/more"])}
    session = _Session(environment)
    quiet_python_workers(session)
    quiet_python_workers(session)
    assert environment["PYTHONPATH"].split(os.pathsep) == [str(WORKER_SITE), "/opt/libs", "/more"]
    fresh: dict[str, str] = {}
    quiet_python_workers(_Session(fresh))
    assert fresh == {"PYTHONPATH": str(WORKER_SITE)}
    quiet_python_workers(_ConnectSession())  # no SparkContext: nothing to do, no error
