"""Fixtures shared by the runtime and Spark tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests import checkout_guard, spark_scratch

# Hypothesis fails an example that takes longer than its deadline (200 ms by default): a
# wall-clock bound that a loaded machine breaks for reasons unrelated to the code under test.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")

REPO = Path(__file__).resolve().parents[1]
_BEFORE = pytest.StashKey[checkout_guard.Snapshot]()
#: Files named in the failure message (the rest are counted).
SHOWN_WRITES = 20


def pytest_sessionstart(session: pytest.Session) -> None:
    """Note the checkout's ignored files, so that the run can be failed if it wrote any."""
    if checkout_guard.is_checkout(REPO):
        session.config.stash[_BEFORE] = checkout_guard.snapshot(REPO)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run when tests wrote into the checkout (tests write to temporary directories)."""
    before = session.config.stash.get(_BEFORE, None)
    written = [] if before is None else checkout_guard.written_since(REPO, before)
    if not written:
        return
    shown = [f"  {entry}" for entry in written[:SHOWN_WRITES]]
    if len(written) > SHOWN_WRITES:
        shown.append(f"  ... and {len(written) - SHOWN_WRITES} more")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "checkout changed", red=True)
        reporter.write_line("this test run wrote into the checkout's git-ignored files (tests "
                            "must write only to temporary directories; if you made these files "
                            "yourself meanwhile, run again):")
        for line in shown:
            reporter.write_line(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def spark_scratch_in_the_runs_temporary_directory(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Spark's scratch directories (``spark-*``, ``blockmgr-*``) go under this run's basetemp.

    Every JVM the tests start -- the session's local Spark, ``spark-submit`` jobs, standalone
    workers -- inherits ``SPARK_LOCAL_DIRS`` (block managers, files, Python workers) and, through
    ``SPARK_SUBMIT_OPTS``, its ``java.io.tmpdir`` (the driver's other temporary directories).
    Spark deletes them at a clean exit only, so a JVM that is killed (the fault tests) left
    them in ``/tmp``, dozens per run; pytest removes old basetemps itself (it keeps three).
    See :mod:`tests.spark_scratch`.
    """
    local = tmp_path_factory.mktemp("spark-local")
    saved = {name: os.environ.get(name) for name in spark_scratch.NAMES}
    os.environ.update(spark_scratch.scratch_env(local, os.environ))
    try:
        yield local
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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

