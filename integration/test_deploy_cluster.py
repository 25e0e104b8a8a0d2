"""The plugin shipped to a standalone cluster the way Spark ships Python (docs/deploy.md).

A standalone master and two workers whose Python has neither this package nor pyarrow
(``PYSPARK_PYTHON`` unset, ``python3`` on their ``PATH`` the base interpreter). The wheel is
built from the working tree, and ``integration/deploy_driver.py`` runs every door; each door's
windows must equal the reference oracle. Two routes, as docs/deploy.md gives them:

* **a packed environment**: a venv holding the wheel and its dependencies but pyspark (the
  cluster's Spark provides it), packed with ``venv-pack``, shipped with ``--archives
  env.tar.gz#env`` and ``spark.pyspark.python=./env/bin/python``; the same archive unpacked as
  ``env/`` where ``spark-submit`` runs serves the driver (``spark.pyspark.driver.python``) and
  the driver-side worker of the Python streaming source, which Spark starts with
  ``spark.pyspark.python``. Every door works;
* **a zip on ``--py-files``**, with a cluster Python that has pyarrow, NumPy and pandas (as a
  cluster running pandas UDFs has): the batch read, the sink and ``ordered()`` (its
  ``applyInPandasWithState`` runs only on executors) work once ``register(spark)`` registered
  the format; Spark starts the driver-side Python process of a Python streaming source without
  ``--py-files`` on its path, so the source fails with the first line the docs quote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark.compat.data import matches_oracle, write_data
from tests.spark.compat.lines import build_wheel, run

from .cluster import SPARK_HOME, StandaloneCluster

pytestmark = pytest.mark.cluster
DRIVER = Path(__file__).resolve().parent / "deploy_driver.py"
DOORS = ("batch", "source", "sink", "ordered")


@dataclass
class Shipped:
    """What the tests ship: the packed environment (and it unpacked), the zip, a bare Python."""

    archive: Path
    unpacked: Path
    zip: Path
    cluster_python: Path


def venv_with_wheel(path: Path, wheel: Path, *remove: str) -> Path:
    """A venv at ``path`` with ``wheel`` installed (dependencies too), less ``remove``."""
    run([sys.executable, "-m", "venv", str(path)])
    pip = [str(path / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*pip, "install", "--no-compile", str(wheel), "venv-pack"])
    run([*pip, "uninstall", "-y", *remove])
    return path


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Shipped:
    root = tmp_path_factory.mktemp("shipped")
    wheel = build_wheel(root / "build")
    packed = venv_with_wheel(root / "packed-venv", wheel, "pyspark", "py4j")
    archive = root / "env.tar.gz"
    run([str(packed / "bin" / "venv-pack"), "-p", str(packed), "-o", str(archive), "--quiet"])
    unpacked = root / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="fully_trusted")
    bare = venv_with_wheel(root / "cluster-python", wheel, "spark_stream_sched", "pyspark",
                           "py4j")
    target = root / "zip-contents"
    run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(wheel)])
    package = root / "spark_stream_sched.zip"
    with zipfile.ZipFile(package, "w") as out:
        for path in sorted(target.rglob("*.py")):
            out.write(path, path.relative_to(target))
    return Shipped(archive, unpacked, package, bare / "bin" / "python")


class BareCluster(StandaloneCluster):
    """A standalone cluster whose processes find no Python with the package or pyarrow."""

    def env(self, *, daemon: bool = False) -> dict[str, str]:
        env = super().env(daemon=daemon)
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV"):
            env.pop(name, None)
        bare_bin = self.root / "bare-bin"
        if not bare_bin.is_dir():
            bare_bin.mkdir(parents=True)
            (bare_bin / "python3").symlink_to(sys._base_executable)  # type: ignore[attr-defined]
        env["PATH"] = os.pathsep.join([str(bare_bin), "/usr/local/bin", "/usr/bin", "/bin"])
        return env


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BareCluster]:
    cluster = BareCluster(tmp_path_factory.mktemp("bare") / "cluster").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def submit(cluster: BareCluster, root: Path, route: list[str], doors: tuple[str, ...],
           python: Path, executors: str) -> dict[str, str]:
    """spark-submit the deploy driver; ``DOOR`` name -> ``ok`` or the failure it printed.

    The Pythons are given as Spark's guide to Python packaging gives them, in the environment of
    ``spark-submit``: ``PYSPARK_DRIVER_PYTHON`` (``python``) and ``PYSPARK_PYTHON``
    (``executors``). The JVM's own driver-side Python workers (the lookup of installed data
    sources, the planners) read these variables, not the ``spark.pyspark.*`` settings.
    """
    env = {**cluster.env(), "PYSPARK_DRIVER_PYTHON": str(python), "PYSPARK_PYTHON": executors}
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url, *route,
               "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
               str(DRIVER), str(root), *doors]
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True,
                          timeout=1200, check=False)
    reported = dict(line.split(" ", 2)[1:] for line in done.stdout.splitlines()
                    if line.startswith("DOOR "))
    assert set(reported) == set(doors), (done.stdout[-3000:], done.stderr[-3000:])
    return reported


def windows(root: Path, door: str) -> list[dict[str, Any]]:
    return pq.read_table(root / door / "windows").to_pylist()


def test_a_packed_environment_runs_every_door(bare_cluster: BareCluster, shipped: Shipped,
                                              tmp_path: Path) -> None:
    tables = write_data(tmp_path)
    (tmp_path / "env").symlink_to(shipped.unpacked, target_is_directory=True)
    reported = submit(bare_cluster, tmp_path, ["--archives", f"{shipped.archive}#env"], DOORS,
                      tmp_path / "env" / "bin" / "python", "./env/bin/python")
    assert reported == dict.fromkeys(DOORS, "ok")
    for door in DOORS:
        matches_oracle(door, windows(tmp_path, door), tables)


def test_a_zip_on_py_files_runs_every_door_but_the_streaming_source(bare_cluster: BareCluster,
                                                                    shipped: Shipped,
                                                                    tmp_path: Path) -> None:
    tables = write_data(tmp_path)
    reported = submit(bare_cluster, tmp_path, ["--py-files", str(shipped.zip)], DOORS,
                      shipped.cluster_python, str(shipped.cluster_python))
    docs = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text()
    missing = "failed: ModuleNotFoundError: No module named 'spark_stream_sched'"
    assert reported["source"] == missing  # its driver-side Python worker lacks the zip
    assert missing.removeprefix("failed: ") in docs
    working = ["batch", "sink", "ordered"]
    assert {door: reported[door] for door in working} == dict.fromkeys(working, "ok")
    for door in working:
        matches_oracle(door, windows(tmp_path, door), tables)
