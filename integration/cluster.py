"""Start and stop a real Spark standalone cluster from the installed pyspark.

The pip package has no ``start-master.sh``; the master and each worker are started with
``bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`` as separate process
groups on loopback, on free ports, each with its own work and log directory. ``wait_alive``
polls the master's JSON endpoint until the workers have registered. ``kill_worker`` sends
SIGKILL to a worker's whole process group (the worker JVM and the executor JVMs it launched),
which is how a lost machine looks to the driver.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.spark_scratch import scratch_env

SPARK_HOME = Path(pyspark.__file__).resolve().parent
JOB = Path(__file__).resolve().parents[1] / "spark_stream_sched" / "jobs" / "ordered_agg_job.py"


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port free now and not handed out before in this process.

    The kernel may give a released port again; a master and a worker started side by side
    would then race for one web UI port, and the loser would take the next one silently.
    """
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class MasterNotReady(OSError):
    """The master's web UI answered, but not with its JSON status."""


def master_status(ui_port: int) -> dict:
    """The master's JSON status (``/json/``): workers, their state and cores used.

    Raises :class:`MasterNotReady` (naming the port and the start of what came back) when the
    answer is not a JSON object with the master's ``url``; connection errors pass through.
    """
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        body = r.read()
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if not isinstance(status, dict) or "url" not in status:
        raise MasterNotReady(f"the web UI on 127.0.0.1:{ui_port} answered /json/ with "
                             f"{body[:120]!r}, not the master's status")
    return status


def cores_used(ui_port: int, worker_ui_port: int) -> int:
    """Cores that running executors use on the worker whose web UI is ``worker_ui_port``."""
    for worker in master_status(ui_port).get("workers", []):
        if (worker.get("webuiaddress", "").endswith(f":{worker_ui_port}")
                and worker.get("state") == "ALIVE"):
            return int(worker.get("coresused", 0))
    return 0


def wait_for_workers(ui_port: int, workers: int, timeout: float,
                     check: Callable[[], None] = lambda: None) -> None:
    """Poll the master until ``workers`` are alive; ``check`` may raise to stop early.

    A master still starting refuses connections or may answer with something that is not its
    status yet (:class:`MasterNotReady`); both are retried until ``timeout``, then
    ``TimeoutError`` names the last failed poll.
    """
    deadline = time.monotonic() + timeout
    last: str = "none failed"
    while time.monotonic() < deadline:
        try:
            alive = master_status(ui_port).get("aliveworkers", 0)
            if alive >= workers:
                return
            last = f"{alive} alive"
        except OSError as exc:
            last = str(exc)
        check()
        time.sleep(1)
    raise TimeoutError(f"{workers} workers not alive after {timeout} s (last poll: {last})")


def spark_env(local: Path | None = None, *, daemon: bool = False) -> dict[str, str]:
    """The environment of the cluster's processes and drivers.

    ``local``: the directory for Spark's scratch files (:func:`tests.spark_scratch.scratch_env`;
    ``daemon`` for a master or worker, so that its executors' files go there too), so a killed
    process (the lost-worker test) leaves them under the cluster's root, which the fixture
    removes, not in ``/tmp``.
    """
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_NO_DAEMONIZE": "1"})
    if local is not None:
        env.update(scratch_env(local, env, daemon=daemon))
    return env


@dataclass
class StandaloneCluster:
    """A master and ``n_workers`` workers (1 core, 1 GiB each) under ``root``."""

    root: Path
    n_workers: int = 2
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    worker_ui_ports: dict[int, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self, *, daemon: bool = False) -> dict[str, str]:
        """:func:`spark_env` with Spark's scratch files under this cluster's root."""
        return spark_env(self.root / "local", daemon=daemon)

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.root / f"{name}.log").open("wb")
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args],
                                stdout=log, stderr=subprocess.STDOUT, env=self.env(daemon=True),
                                cwd=self.root, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 120.0) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.master_port), "--webui-port", str(self.ui_port))
        self.workers = [self._start_worker(i) for i in range(self.n_workers)]
        self.wait_alive(self.n_workers, timeout)
        return self

    def status(self) -> dict:
        return master_status(self.ui_port)

    def wait_alive(self, workers: int, timeout: float) -> None:
        def exited_early() -> None:
            for proc in [self.procs[0], *self.workers]:
                if proc.poll() is not None:
                    raise RuntimeError(f"a cluster process exited early; see logs in {self.root}")

        try:
            wait_for_workers(self.ui_port, workers, timeout, exited_early)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; logs in {self.root}") from None

    def _start_worker(self, index: int) -> subprocess.Popen[bytes]:
        work = self.root / f"worker-{index}"
        work.mkdir(exist_ok=True)
        port = free_port()
        self.worker_ui_ports[index] = port
        return self._spawn(f"worker-{index}", "org.apache.spark.deploy.worker.Worker", self.url,
                           "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                           "--webui-port", str(port), "--work-dir", str(work))

    def job_dir(self, name: str) -> Path:
        """A fresh directory for one job's config, data, output and checkpoint."""
        path = self.root / "jobs" / name
        path.mkdir(parents=True)
        return path

    def submit(self, config: Path) -> subprocess.Popen[str]:
        """spark-submit the ordered-agg job with ``config`` to this cluster."""
        command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.url,
                   "--conf", f"spark.pyspark.python={sys.executable}",
                   "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
                   "--conf", "spark.ui.enabled=false", str(JOB), "--conf", str(config),
                   "--quiet"]
        return subprocess.Popen(command, env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, cwd=config.parent)

    def cores_used(self, index: int) -> int:
        """Cores that running executors use on worker ``index``, as the master reports it."""
        return cores_used(self.ui_port, self.worker_ui_ports[index])

    def restart_worker(self, index: int, timeout: float = 120.0) -> None:
        """Start worker ``index`` again (after :meth:`kill_worker`) and wait for it."""
        self.workers[index] = self._start_worker(index)
        self.wait_alive(self.n_workers, timeout)

    def kill_worker(self, index: int) -> None:
        proc = self.workers[index]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
