"""Fixtures shared by the runtime and Spark tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs (needs root; skipped elsewhere), unmounted afterwards."""
    yield from tmpfs(tmp_path / "small-disk", "256k")


@pytest.fixture
def disk_of_4m(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MiB tmpfs (needs root; skipped elsewhere), unmounted afterwards."""
    yield from tmpfs(tmp_path / "disk-4m", "4m")


def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``mount`` (skip the test when that is impossible)."""
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        # A process that still holds a file there (a Spark Python worker) makes a plain
        # umount fail with "busy"; detach lazily then, so no mount outlives the test.
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=False)

