"""The docker-compose cluster of ``docker-compose.yml``, driven like :class:`StandaloneCluster`.

:class:`ComposeCluster` starts Docker's daemon when none runs (and stops it again), builds the
images with ``docker/build-images.sh`` (a local debootstrap base, no registry), brings up the
master and two workers on free loopback ports with host networking, and submits jobs through
the compose file's ``job`` service. ``kill_worker`` is ``docker-compose kill`` (SIGKILL of the
container: the worker JVM and its executors), which is how a lost machine looks to the driver.
Data, output and checkpoints live in ``data_dir``, mounted at the same path in every container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import cores_used, free_port, master_status, wait_for_workers

REPO = Path(__file__).resolve().parents[1]
IMAGE = "spark-stream-sched:dev"


def docker_missing() -> str | None:
    """Why the compose cluster cannot run here (None when it can)."""
    for tool in ("docker", "dockerd", "docker-compose", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install docker.io docker-compose debootstrap)"
    if os.geteuid() != 0:
        return "dockerd and debootstrap need root"
    return None


def _docker_ok() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@dataclass
class ComposeCluster:
    """Master + 2 workers of ``docker-compose.yml`` under project ``project``."""

    data_dir: Path
    project: str = "sss-test"
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    worker_ui_ports: dict[int, int] = field(default_factory=dict)
    dockerd: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def env(self, job: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"SSS_DATA": str(self.data_dir), "SSS_IMAGE": IMAGE,
                    "SSS_MASTER_PORT": str(self.master_port), "SSS_MASTER_UI": str(self.ui_port),
                    "SSS_WORKER1_UI": str(self.worker_ui_ports[0]),
                    "SSS_WORKER2_UI": str(self.worker_ui_ports[1])})
        if job is not None:
            env["SSS_JOB"] = str(job)
        return env

    def compose(self, *args: str, job: Path | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker-compose", "-p", self.project, *args], cwd=REPO,
                              env=self.env(job), capture_output=True, text=True, check=check)

    def start(self, timeout: float = 180.0) -> ComposeCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.worker_ui_ports = {0: free_port(), 1: free_port()}
        if not _docker_ok():
            log = (self.data_dir / "dockerd.log").open("wb")
            self.dockerd = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
            deadline = time.monotonic() + 60
            while not _docker_ok():
                if time.monotonic() > deadline or self.dockerd.poll() is not None:
                    raise RuntimeError(f"dockerd did not start; see {self.data_dir}/dockerd.log")
                time.sleep(1)
        subprocess.run([str(REPO / "docker" / "build-images.sh")], cwd=REPO, check=True,
                       capture_output=True)
        self.compose("up", "-d", "master", "worker-1", "worker-2")
        self.wait_alive(2, timeout)
        return self

    def status(self) -> dict:
        return master_status(self.ui_port)

    def wait_alive(self, workers: int, timeout: float) -> None:
        try:
            wait_for_workers(self.ui_port, workers, timeout)
        except TimeoutError as exc:
            logs = self.compose("logs", "--tail", "30", check=False).stdout
            raise TimeoutError(f"{exc}:\n{logs}") from None

    def job_dir(self, name: str) -> Path:
        """A fresh directory under the shared data directory (same path in every container)."""
        path = self.data_dir / name
        path.mkdir(parents=True)
        return path

    def submit(self, config: Path) -> subprocess.Popen[str]:
        """Run the ``job`` service with ``config`` (a path under ``data_dir``)."""
        return subprocess.Popen(["docker-compose", "-p", self.project, "run", "--rm", "job"],
                                cwd=REPO, env=self.env(config), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def cores_used(self, index: int) -> int:
        """Cores that running executors use on worker ``index``, as the master reports it."""
        return cores_used(self.ui_port, self.worker_ui_ports[index])

    def kill_worker(self, index: int) -> None:
        self.compose("kill", f"worker-{index + 1}")

    def restart_worker(self, index: int, timeout: float = 120.0) -> None:
        self.compose("up", "-d", f"worker-{index + 1}")
        self.wait_alive(2, timeout)

    def stop(self) -> None:
        self.compose("down", "--remove-orphans", check=False)
        if self.dockerd is not None:
            self.dockerd.terminate()
            try:
                self.dockerd.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.dockerd.kill()
