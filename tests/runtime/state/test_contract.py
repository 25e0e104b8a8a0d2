"""One contract, every state user (Flink's ``StateBackendTestBase``, quix-streams' store tests).

Each user of :mod:`spark_stream_sched.runtime.state` (``tests/runtime/state/users.py``: the
source's group state, the sink's commit log, the input manifest, a snapshot file) must

* read back what it wrote;
* keep the previous version when a write fails (an ``EIO`` from fsync) or the writing process
  is SIGKILLed at a random moment, and leave no temporary file after a failed write;
* refuse a truncated, bit-flipped or missing file with a StateError naming that file;
* on a full disk (a real 256 KiB tmpfs) raise a SpillError naming the file, leave no temporary
  file, keep the previous version — and work again once there is space.

The input manifest is an append-only log: a torn tail is what a crash mid-append leaves, so it
is cut off with a warning naming the file, and a missing manifest is an input that admitted
nothing yet. Each line carries its own checksum, so a flipped bit inside a number or a path is
refused naming the file and line.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spark_stream_sched.errors import SpillError, StateError
from spark_stream_sched.testing.faults import fill_disk

from .users import USERS, StateUser

REPO = Path(__file__).resolve().parents[3]
APPEND_ONLY = {"input-manifest"}


@pytest.fixture(params=sorted(USERS))
def user(request: pytest.FixtureRequest) -> StateUser:
    return USERS[request.param]


def temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def names_one_of(exc: BaseException, files: list[Path]) -> bool:
    return any(str(f) in str(exc) for f in files)


def test_round_trip(user: StateUser, tmp_path: Path) -> None:
    for n in (1, 2, 3):
        user.write(tmp_path, n)
        assert user.read(tmp_path) == n
    assert temp_files(tmp_path) == []


def test_failed_write_keeps_the_previous_version_and_no_temp_file(
        user: StateUser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user.write(tmp_path, 1)
    files = user.files(tmp_path)
    real_fsync = os.fsync

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(SpillError, match="cannot write") as failure:
        user.write(tmp_path, 2)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert str(tmp_path) in str(failure.value)
    assert temp_files(tmp_path) == []
    assert user.read(tmp_path) == 1
    assert user.files(tmp_path) == files


@pytest.mark.parametrize("round_", range(2))
def test_sigkill_mid_write_leaves_a_complete_version(user: StateUser, tmp_path: Path,
                                                     round_: int) -> None:
    """Kill a process writing in a loop at a random moment; restart from what is on disk."""
    rng = random.Random(round_)
    last = 0
    for _ in range(2):
        proc = subprocess.Popen([sys.executable, "-m", "tests.runtime.state.users", user.name,
                                 str(tmp_path), str(last)], cwd=REPO, stdout=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.stdout is not None
        target = last + rng.randint(2, 6)
        while last < target:
            line = proc.stdout.readline()
            assert line, f"writer of {user.name} died"
            last = int(line)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        found = user.read(tmp_path)  # a complete version, never a torn one
        # the writer may have finished more versions between our last readline and the kill
        assert found >= last, f"{user.name}: read {found} after {last} was durable"
        last = found


def test_truncated_file_is_refused_naming_it(user: StateUser, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    user.write(tmp_path, 1)
    user.write(tmp_path, 2)
    for path in user.files(tmp_path):
        data = path.read_bytes()
        for length in (0, 1, len(data) // 2, len(data) - 1):
            path.write_bytes(data[:length])
            if user.name in APPEND_ONLY:  # a torn tail: the crash mid-append it stands for
                caplog.clear()
                kept = data[:length]
                with caplog.at_level(logging.WARNING):
                    assert user.read(tmp_path) == kept.count(b"\n")
                assert (str(path) in caplog.text) == (not kept.endswith(b"\n") and length > 0)
            else:
                with pytest.raises(StateError, match=re.escape(str(path))):
                    user.read(tmp_path)
            path.write_bytes(data)


def flip_every_bit(user: StateUser, root: Path) -> list[str]:
    """Flip the low bit of every byte of every file; return the flips that were not refused."""
    missed = []
    for path in user.files(root):
        data = path.read_bytes()
        for i in range(len(data)):
            path.write_bytes(data[:i] + bytes([data[i] ^ 1]) + data[i + 1:])
            try:
                user.read(root)
                missed.append(f"{path.name}[{i}]: accepted")
            except StateError as exc:
                if str(path) not in str(exc):
                    missed.append(f"{path.name}[{i}]: {exc}")
            path.write_bytes(data)
    return missed


@pytest.mark.parametrize("name", sorted(set(USERS) - APPEND_ONLY))
def test_corrupted_byte_is_refused_naming_the_file(name: str, tmp_path: Path) -> None:
    USERS[name].write(tmp_path, 1)
    USERS[name].write(tmp_path, 2)
    assert flip_every_bit(USERS[name], tmp_path) == []


def test_corrupted_manifest_byte_is_refused_naming_the_file(tmp_path: Path) -> None:
    """Every flip is refused except the last byte: a last line without its newline is what a
    crash mid-append leaves, so it is cut off as torn (logged, naming the file)."""
    user = USERS["input-manifest"]
    user.write(tmp_path, 1)
    user.write(tmp_path, 2)
    (log,) = user.files(tmp_path)
    last = len(log.read_bytes()) - 1
    assert flip_every_bit(user, tmp_path) == [f"{log.name}[{last}]: accepted"]


def test_missing_file_is_refused_naming_it(user: StateUser, tmp_path: Path) -> None:
    user.write(tmp_path, 1)
    user.write(tmp_path, 2)
    commit_points = user.commit_points(tmp_path)
    for path in user.files(tmp_path):
        data = path.read_bytes()
        path.unlink()
        if user.name in APPEND_ONLY:  # an input that admitted nothing yet
            assert user.read(tmp_path) == 0
        elif path in commit_points:  # version 2 was never committed
            assert user.read(tmp_path) == 1
        else:
            with pytest.raises(StateError, match=re.escape(str(path))):
                user.read(tmp_path)
        path.write_bytes(data)


def test_full_disk_names_the_file_leaves_no_temp_file_and_recovers(
        user: StateUser, small_disk: Path) -> None:
    root = small_disk / "state"
    user.write(root, 1)
    filler = fill_disk(small_disk)
    big = 200 if user.name in APPEND_ONLY else 2  # an append must outgrow its last block
    with pytest.raises(SpillError, match="cannot write") as failure:
        user.write(root, big, rows=50_000)
    assert str(root) in str(failure.value)
    assert temp_files(small_disk) == []
    assert user.read(root) == 1
    filler.unlink()
    user.write(root, 2)
    assert user.read(root) == 2
