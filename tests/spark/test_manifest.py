"""Input manifests and the state-location lock, without Spark (issue 12, defects 4 and 6).

The manifest is the durable list of files the driver admitted into an input: replays plan from
it, late-sorting files are reported (or skipped and counted), torn appends are tolerated and
corrupt lines or changed files are clear errors.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.io.manifest import FileManifest, manifest_path, read_manifest
from spark_stream_sched.spark.location_lock import LocationLock


def touch(directory, name: str, data: bytes = b"x") -> str:
    path = directory / name
    path.write_bytes(data)
    return str(path)


@pytest.fixture
def input_dir(tmp_path):
    directory = tmp_path / "in0"
    directory.mkdir()
    return directory


def listing(directory) -> list[str]:
    return sorted(str(p) for p in directory.iterdir())


def test_new_files_are_appended_in_name_order_and_survive_a_reload(tmp_path, input_dir) -> None:
    b, a = touch(input_dir, "b"), touch(input_dir, "a", b"xyz")
    manifest = FileManifest(str(tmp_path / "state"), 0, str(input_dir))
    assert manifest.sync(listing(input_dir), "fail") == []
    assert manifest.admitted == [a, b]
    c = touch(input_dir, "c")
    manifest.sync(listing(input_dir), "fail")
    reloaded = FileManifest(str(tmp_path / "state"), 0, str(input_dir))
    assert reloaded.admitted == [a, b, c]
    assert [(e.index, e.size) for e in reloaded.entries] == [(0, 3), (1, 1), (2, 1)]


def test_frozen_manifest_does_not_admit_new_files(tmp_path, input_dir) -> None:
    touch(input_dir, "a")
    manifest = FileManifest(str(tmp_path / "state"), 0, str(input_dir))
    manifest.sync(listing(input_dir), "fail")
    touch(input_dir, "b")
    manifest.sync(listing(input_dir), "fail", admit_new=False)
    assert manifest.admitted == [str(input_dir / "a")]


def test_a_torn_last_line_is_dropped_and_cut_off(tmp_path, input_dir) -> None:
    touch(input_dir, "a"), touch(input_dir, "b")
    state = str(tmp_path / "state")
    FileManifest(state, 0, str(input_dir)).sync(listing(input_dir), "fail")
    path = manifest_path(state, 0)
    intact = os.path.getsize(path)
    with open(path, "ab") as fh:
        fh.write(b'{"index": 2, "file": "/x/c", "si')  # the driver died mid-append
    manifest = FileManifest(state, 0, str(input_dir))
    assert len(manifest.entries) == 2
    assert os.path.getsize(path) == intact
    touch(input_dir, "c")
    manifest.sync(listing(input_dir), "fail")
    assert [e.index for e in read_manifest(path)[0]] == [0, 1, 2]


def test_a_corrupt_line_names_the_file_and_line(tmp_path, input_dir) -> None:
    for name in "abc":
        touch(input_dir, name)
    state = str(tmp_path / "state")
    FileManifest(state, 0, str(input_dir)).sync(listing(input_dir), "fail")
    path = manifest_path(state, 0)
    with open(path, "rb") as fh:
        lines = fh.readlines()
    lines[1] = b'{"index": 1, "file": 7}\n'
    with open(path, "wb") as fh:
        fh.writelines(lines)
    with pytest.raises(StateError, match=rf"{path} line 2 is corrupt"):
        FileManifest(state, 0, str(input_dir))


def test_a_file_whose_size_changed_is_refused(tmp_path, input_dir) -> None:
    a = touch(input_dir, "a")
    manifest = FileManifest(str(tmp_path / "state"), 0, str(input_dir))
    manifest.sync(listing(input_dir), "fail")
    manifest.check_unchanged([a])
    touch(input_dir, "a", b"longer")
    with pytest.raises(InputError, match=rf"file '{a}' was 1 bytes .* is 6 bytes now"):
        manifest.check_unchanged([a])


def test_a_late_file_fails_by_default_naming_input_file_and_last_file(tmp_path,
                                                                      input_dir) -> None:
    touch(input_dir, "a"), touch(input_dir, "c")
    manifest = FileManifest(str(tmp_path / "state"), 3, str(input_dir))
    manifest.sync(listing(input_dir), "fail")
    late = touch(input_dir, "b")
    with pytest.raises(InputError) as info:
        manifest.sync(listing(input_dir), "fail")
    message = str(info.value)
    assert f"input 3 ({str(input_dir)!r})" in message
    assert repr(late) in message
    assert repr(str(input_dir / "c")) in message
    assert "lateFiles=skip" in message
    assert manifest.sync(listing(input_dir), "defer") == [late]  # reported later, not recorded
    assert late not in {e.file for e in manifest.entries}


def test_a_late_file_is_skipped_once_recorded_and_counted(tmp_path, input_dir) -> None:
    touch(input_dir, "a"), touch(input_dir, "c")
    state = str(tmp_path / "state")
    manifest = FileManifest(state, 0, str(input_dir))
    manifest.sync(listing(input_dir), "skip")
    late = touch(input_dir, "b")
    warnings: list[str] = []
    record = lambda fmt, *args: warnings.append(fmt % args)  # noqa: E731
    assert manifest.sync(listing(input_dir), "skip", warn=record) == [late]
    assert manifest.sync(listing(input_dir), "skip", warn=record) == []  # counted once
    assert len(warnings) == 1
    assert repr(late) in warnings[0]
    reloaded = FileManifest(state, 0, str(input_dir))
    assert reloaded.skipped_count == 1
    assert late not in reloaded.admitted
    assert reloaded.last_file == str(input_dir / "c")


# -- the state-location lock -------------------------------------------------------------------

HOLD = """
import sys, time
from spark_stream_sched.spark.location_lock import LocationLock
lock = LocationLock(sys.argv[1]); lock.acquire(); print("held", flush=True); time.sleep(60)
"""


def test_a_second_process_is_refused_naming_the_location_and_holder(tmp_path) -> None:
    location = str(tmp_path / "state")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, location], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StateError, match=rf"stateLocation '{location}' is in use by "
                                             rf".*pid {holder.pid} on host"):
            LocationLock(location).acquire(wait_seconds=0.3)
    finally:
        holder.kill()
        holder.wait()
    lock = LocationLock(location)  # a dead holder leaves no stale lock
    lock.acquire(wait_seconds=5)
    assert lock.held
    lock.release()


def test_the_lock_is_taken_over_within_one_process(tmp_path) -> None:
    first, second = LocationLock(str(tmp_path)), LocationLock(str(tmp_path))
    first.acquire()
    second.acquire(wait_seconds=0)
    assert second.held
    assert not first.held
    first.release()  # releasing a lock no longer held is a no-op
    second.release()
