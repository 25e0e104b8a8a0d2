"""Fixtures for the real-cluster tests: a standalone cluster, or the docker-compose one.

``cluster`` is parametrised: ``standalone`` (master + 2 workers started from the installed
pyspark, marker ``cluster``) and ``compose`` (``docker-compose.yml``: images built locally, host
networking, marker ``compose`` as well). The same tests run against both.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .cluster import StandaloneCluster
from .compose import ComposeCluster, docker_missing


@pytest.fixture(scope="session", params=["standalone",
                                         pytest.param("compose", marks=pytest.mark.compose)])
def cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    root = Path(tempfile.mkdtemp(prefix=f"sss-{request.param}-"))
    if request.param == "compose":
        why = docker_missing()
        if why is not None:
            pytest.skip(f"docker-compose cluster cannot run here: {why}")
        running: Any = ComposeCluster(root / "data").start()
    else:
        running = StandaloneCluster(root / "cluster").start()
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)
