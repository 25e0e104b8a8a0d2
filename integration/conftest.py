"""Fixtures for the real-cluster tests: one standalone master + 2 workers for the session."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster import StandaloneCluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[StandaloneCluster]:
    root = Path(tempfile.mkdtemp(prefix="sss-cluster-"))
    running = StandaloneCluster(root / "cluster").start()
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)
