"""``bench spark``'s CPU sampling: roles from command lines, CPU of child processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_stream_sched.bench.spark_cpu import measure, role_of

PYTHON = "/venv/bin/python"


@pytest.mark.parametrize(("cmdline", "role"), [
    # command lines as pyspark 4.3 starts its Python processes (forked workers keep them)
    (f"{PYTHON} -m pyspark.daemon pyspark.worker", "tasks"),
    (f"{PYTHON} -m pyspark.worker", "tasks"),
    (f"{PYTHON} -m pyspark.daemon pyspark.sql.worker.python_streaming_sink_runner", "commit"),
    (f"{PYTHON} -m pyspark.daemon pyspark.sql.worker.write_into_data_source", "driver"),
    (f"{PYTHON} -m pyspark.daemon pyspark.sql.streaming.python_streaming_source_runner",
     "driver"),
    ("/usr/lib/jvm/java-17/bin/java -cp x org.apache.spark.deploy.SparkSubmit pyspark-shell",
     "jvm"),
    (f"{PYTHON} -m pytest tests", None),
    ("", None),
])
def test_role_of_a_command_line(cmdline: str, role: str | None) -> None:
    assert role_of(cmdline) == role


BURN = """
import sys, time
while time.process_time() < 0.4:
    pass
print("burned", flush=True)
sys.stdin.readline()
"""


def burner(module: str) -> subprocess.Popen[str]:
    """A Python process whose command line names ``module``: it burns 0.4 s of CPU, then waits
    for a line on stdin."""
    child = subprocess.Popen([sys.executable, "-c", BURN, "-m", module], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline() == "burned\n"
    return child


def test_a_child_that_starts_during_the_measurement_counts_whole() -> None:
    with measure() as cpu:
        child = burner("pyspark.sql.worker.python_streaming_sink_runner")
    child.communicate("\n")
    roles = cpu.by_role()
    assert 0.39 <= roles["commit"] < 1.5, roles
    assert roles["tasks"] < 0.1  # nothing else posed as a task worker


def test_cpu_before_the_measurement_is_not_counted() -> None:
    child = burner("pyspark.worker")
    with measure() as cpu:
        child.communicate("\n")
    assert cpu.by_role()["tasks"] < 0.2
    assert cpu.exited >= 1
