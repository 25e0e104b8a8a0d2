"""Input manifests without Spark (the lock is in tests/runtime/state).

The manifest is the durable list of files the driver admitted into an input: replays plan from
it, late-sorting files are reported (or skipped and counted), torn appends are tolerated and
corrupt lines or changed files are clear errors.
"""

from __future__ import annotations

import os

import pytest

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.inputs.manifest import FileManifest, manifest_path, read_manifest


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


# -- compaction of the consumed prefix ---------------------------------------------------------


def streamed(input_dir, state: str, n_files: int, keep: int, compact_every: int = 1,
             sizes: list[int] | None = None) -> FileManifest:
    """``n_files`` files arrive one by one; each is consumed at once and deleted ``keep`` files
    later (a user's retention); the manifest is compacted at the file being read. ``sizes``
    gets the log's bytes after each file."""
    manifest = FileManifest(state, 0, str(input_dir))
    for n in range(n_files):
        touch(input_dir, f"f{n:05d}")
        if n >= keep:
            os.unlink(input_dir / f"f{n - keep:05d}")
        manifest.sync(listing(input_dir), "skip")
        if n % compact_every == 0:
            manifest.compact(str(input_dir / f"f{n:05d}"), at_least=4)
        if sizes is not None:
            sizes.append(os.path.getsize(manifest_path(state, 0)))
    return manifest


def test_compaction_keeps_the_log_bounded_by_the_directory(tmp_path, input_dir) -> None:
    state = str(tmp_path / "state")
    sizes: list[int] = []
    streamed(input_dir, state, 400, keep=6, sizes=sizes)
    # 6 files in the directory, at most 4 consumed entries before a compaction: the log is as
    # large after 400 files as after 50, but for the digits of the entries' indices (without
    # compaction: ~190 B a file, 76 KB)
    assert max(sizes[-50:]) <= 1.02 * max(sizes[:50]) < 2_000, sizes
    reloaded = FileManifest(state, 0, str(input_dir))
    assert reloaded.folded.count + len(reloaded.entries) == 400
    assert [e.index for e in reloaded.entries] == list(range(reloaded.folded.count, 400))
    touch(input_dir, "f00400")
    reloaded.sync(listing(input_dir), "fail")  # appends continue the numbering
    assert FileManifest(state, 0, str(input_dir)).entries[-1].index == 400


def test_folded_files_stay_known_and_late_files_are_still_caught(tmp_path, input_dir) -> None:
    state = str(tmp_path / "state")
    streamed(input_dir, state, 20, keep=6)
    manifest = FileManifest(state, 0, str(input_dir))  # a restart reads the folded line
    assert manifest.folded.count >= 4
    still_listed = str(input_dir / "f00015")
    assert still_listed in manifest.folded.listed
    assert manifest.sync(listing(input_dir), "fail") == []  # folded, listed: neither new nor late
    late = touch(input_dir, "f00010x")  # sorts inside the folded prefix, never seen
    with pytest.raises(InputError, match=r"file '.*f00010x' appeared after"):
        manifest.sync(listing(input_dir), "fail")
    os.unlink(late)
    reborn = touch(input_dir, "f00002")  # folded, left the directory, written again
    assert manifest.sync(listing(input_dir), "defer") == [reborn]


def test_compaction_keeps_the_changed_file_check_and_skipped_count(tmp_path, input_dir) -> None:
    state = str(tmp_path / "state")
    manifest = streamed(input_dir, state, 12, keep=20, compact_every=100)
    touch(input_dir, "f00003x")  # late: skipped and counted
    manifest.sync(listing(input_dir), "skip")
    for n in range(12, 20):
        touch(input_dir, f"f{n:05d}")
    manifest.sync(listing(input_dir), "skip")
    assert manifest.compact(str(input_dir / "f00015"), at_least=4) == 16
    assert manifest.skipped_count == 1
    reloaded = FileManifest(state, 0, str(input_dir))
    assert reloaded.skipped_count == 1
    assert reloaded.admitted == [str(input_dir / f"f{n:05d}") for n in range(15, 20)]
    unconsumed = touch(input_dir, "f00017", b"rewritten")
    with pytest.raises(InputError, match=rf"file '{unconsumed}' was 1 bytes"):
        reloaded.check_unchanged(reloaded.admitted)
    assert reloaded.compact(str(input_dir / "f00016"), at_least=4) == 0  # 1 ahead: not worth it
