"""``bench spark``'s CPU sampling: roles from command lines, CPU of child processes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_stream_sched.bench.spark_cpu import measure, role_of, thread_role

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


@pytest.mark.parametrize(("comm", "role"), [
    # /proc's comm: the first 15 characters of the Java thread's name
    ("Executor task l", "jvm_tasks"),
    ("stdout writer f", "jvm_tasks"),
    ("C2 CompilerThre", "jvm_runtime"),
    ("GC Thread#1", "jvm_runtime"),
    ("G1 Conc#0", "jvm_runtime"),
    ("stream executio", None),
    ("dag-scheduler-e", None),
    ("Thread-3", None),
])
def test_thread_role_of_a_jvm_thread_name(comm: str, role: str | None) -> None:
    assert thread_role(comm) == role


THREADS = """
import sys, threading, time

done = threading.Event()

def burn(name, seconds, burned=None):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as comm:
        comm.write(name)
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass
    if burned is not None:
        burned.set()
        done.wait()

burned = [threading.Event(), threading.Event()]
threads = [threading.Thread(target=burn, args=("Executor task l", 0.4, burned[0])),
           threading.Thread(target=burn, args=("C2 CompilerThre", 0.2, burned[1]))]
for thread in threads:
    thread.start()
burn("stream executio", 0.3)
for event in burned:
    event.wait()
print("burned", flush=True)
sys.stdin.readline()
done.set()
"""


def test_a_jvms_cpu_is_split_by_its_threads_names() -> None:
    # a process whose argv[0] is "java" is a JVM to the sampler; its threads name themselves
    # and stay alive until the measurement's last sample
    with measure() as cpu:
        child = subprocess.Popen(["bash", "-c", f'exec -a java "{sys.executable}" -c "$0"',
                                  THREADS], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        assert child.stdout is not None
        assert child.stdout.readline() == "burned\n"
    child.communicate("\n")
    roles = cpu.by_role()
    assert roles["jvm"] >= 0.89, roles  # the whole process
    assert 0.39 <= roles["jvm_tasks"] < 0.5, roles
    assert 0.19 <= roles["jvm_runtime"] < 0.3, roles
    # the rest, the main thread's 0.3 s and the interpreter's start, is the driver's
    assert roles["jvm_driver"] >= 0.29, roles
    assert roles["jvm_driver"] == pytest.approx(
        roles["jvm"] - roles["jvm_tasks"] - roles["jvm_runtime"], abs=0.002)
