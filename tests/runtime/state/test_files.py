"""The file backend of the state store: versions, manifests, the worker cache (pure: no JVM).

The source's and the sink's one layout (docs/state_store.md): a batch writes files only for the
groups whose state changed, each writer commits a manifest naming every group it owns, a version
is the union of its manifests, pruning keeps what a kept manifest names, and the worker's cache
answers only for the exact version and content the checkpoint holds -- so it can make a batch
faster, never different.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.files import (
    FileStateStore,
    manifest_names,
    version_dir,
)
from spark_stream_sched.runtime.state.group_cache import DEFAULT_BUDGET, GroupCache
from spark_stream_sched.runtime.state.store import BatchStore, GroupState, encode_group


def state(*values: int) -> GroupState:
    return GroupState(pa.table({"ts": pa.array(list(values), pa.int64())}), b"w" * len(values))


def commit(root: Path, start: str | None, end: str, states: dict[int, GroupState],
           cache: GroupCache | None = None, writer: str = "t0000") -> BatchStore:
    """One task's batch: load every group at ``start``, save ``states`` as ``end``."""
    files = FileStateStore(str(root), cache)
    store = BatchStore(files, None if start is None else files.entries(start), end, writer)
    for group in states:
        store.load(group)
    store.save(states)
    return store


def load(root: Path, group: int, version: str, cache: GroupCache | None = None) -> GroupState:
    files = FileStateStore(str(root), cache)
    return files.get(group, files.entries(version)[group])


def files_of(root: Path, version: str) -> list[str]:
    return sorted(n for n in os.listdir(version_dir(str(root), version)) if n.startswith("group-"))


def test_round_trip_and_no_temporary_file(tmp_path: Path) -> None:
    pending = pa.table({"ts": pa.array([1, 2], pa.int64())})
    commit(tmp_path, None, "v1", {3: GroupState(pending, b"\x00window", hold=5), 4: GroupState()})
    loaded = load(tmp_path, 3, "v1")
    assert loaded.pending.equals(pending)
    assert (loaded.window, loaded.hold) == (b"\x00window", 5)
    assert load(tmp_path, 4, "v1") == GroupState()  # an empty group has no file
    assert sorted(os.listdir(version_dir(str(tmp_path), "v1"))) == [
        "_manifest-t0000.json", "group-0003.t0000.state"]


def test_only_changed_groups_get_a_file_and_the_manifest_points_back(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1), 1: state(2)})
    store = commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2, 3)})
    assert files_of(tmp_path, "v1") == ["group-0000.t0000.state", "group-0001.t0000.state"]
    assert files_of(tmp_path, "v2") == ["group-0001.t0000.state"]  # group 0 did not change
    assert store.metrics["state_files_written"] == 1
    assert store.metrics["state_files_unchanged"] == 1
    assert FileStateStore(str(tmp_path)).entries("v2")[0].version == "v1"
    assert load(tmp_path, 0, "v2").pending.equals(state(1).pending)
    assert load(tmp_path, 1, "v2").window == b"ww"


def test_groups_of_several_writers_form_one_version(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)}, writer="t0000")
    commit(tmp_path, None, "v1", {1: state(2)}, writer="t0001")
    entries = FileStateStore(str(tmp_path)).entries("v1")
    assert sorted(entries) == [0, 1]
    # a group moves to task 0 in the next batch: found through task 1's manifest of v1
    commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2)}, writer="t0000")
    assert FileStateStore(str(tmp_path)).entries("v2")[1] == entries[1]


def test_a_replayed_batch_rewrites_identical_files(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    commit(tmp_path, "v1", "v2", {0: state(1, 2)})
    group = Path(version_dir(str(tmp_path), "v2")) / "group-0000.t0000.state"
    manifest = Path(version_dir(str(tmp_path), "v2")) / "_manifest-t0000.json"
    first, before = group.read_bytes(), manifest.read_bytes()
    commit(tmp_path, "v1", "v2", {0: state(1, 2)})
    assert group.read_bytes() == first
    assert manifest.read_bytes() == before


def test_a_group_no_manifest_names_is_missing_state(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    files = FileStateStore(str(tmp_path))
    store = BatchStore(files, files.entries("v1"), "v2", "t0000", where="state version v1")
    with pytest.raises(StateError, match=r"partition group 3 is missing: state version v1 does "
                                         r"not name it"):
        store.load(3)
    with pytest.raises(StateError, match=r"state version v9 is missing: .*v9 holds no manifest, "
                                         r"so this stateLocation does not hold"):
        files.entries("v9")


def test_cache_hits_only_the_exact_version_and_content(tmp_path: Path) -> None:
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1), 1: state(2)}, cache)
    files = FileStateStore(str(tmp_path), cache)
    for group, entry in files.entries("v1").items():
        files.get(group, entry)
    assert files.cache_hits == 2
    # a batch replayed from v1 after v2 was cached: the cache holds v2 only -> files
    commit(tmp_path, "v1", "v2", {0: state(1, 3), 1: state(2, 4)}, cache)
    replay = FileStateStore(str(tmp_path), cache)
    for group, entry in replay.entries("v1").items():
        assert replay.get(group, entry).pending.equals(state(group + 1).pending)
    assert replay.cache_hits == 0
    # another worker (or a restarted one) has an empty cache: the same states from the files
    other = FileStateStore(str(tmp_path), GroupCache())
    for group, entry in other.entries("v2").items():
        assert other.get(group, entry).window == FileStateStore(
            str(tmp_path), cache).get(group, entry).window
    assert other.cache_hits == 0


def test_cache_is_not_trusted_when_the_checkpoint_differs(tmp_path: Path) -> None:
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1)}, cache)
    # the state directory replaced under the same path by another query's v1
    other = tmp_path / "other"
    commit(other, None, "v1", {0: state(7)})
    shutil.rmtree(version_dir(str(tmp_path), "v1"))
    os.replace(version_dir(str(other), "v1"), version_dir(str(tmp_path), "v1"))
    assert load(tmp_path, 0, "v1", cache).pending.equals(state(7).pending)
    # a lost checkpoint is an error even though the cache still holds the state
    commit(tmp_path, "v1", "v2", {0: state(7, 8)}, cache)
    os.unlink(Path(version_dir(str(tmp_path), "v2")) / "group-0000.t0000.state")
    with pytest.raises(StateError, match=r"state of partition group 0 is missing: .*v2"):
        load(tmp_path, 0, "v2", cache)


def test_cache_keeps_within_its_budget_least_recently_used_first() -> None:
    cache = GroupCache(budget=250)
    for group in range(3):
        cache.put("loc", group, "v1", "d", bytes(100))
    assert cache.size == 200
    assert cache.get("loc", 0, "v1", "d") is None  # evicted first
    assert cache.get("loc", 2, "v1", "d") is not None
    cache.put("loc", 2, "v2", "e", bytes(100))  # a group keeps only its newest version
    assert cache.get("loc", 2, "v1", "d") is None
    assert cache.size == 200
    cache.put("loc", 9, "v1", "d", bytes(300))  # larger than the budget: not cached
    assert cache.get("loc", 9, "v1", "d") is None
    cache.resize(100)
    assert cache.size <= 100


def test_prune_keeps_the_files_that_kept_manifests_name(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1), 1: state(0)})
    for i in range(2, 6):  # group 0 never changes again; group 1 changes every batch
        commit(tmp_path, f"v{i - 1}", f"v{i}", {0: state(1), 1: state(*range(i))})
    assert FileStateStore(str(tmp_path)).prune("v5", keep_older=2) == 1  # v2 goes, v1 stays
    assert sorted(os.listdir(tmp_path / "versions")) == ["v1", "v3", "v4", "v5"]
    # group 1's old file and the manifest of v1 go; group 0's file stays
    assert os.listdir(tmp_path / "versions" / "v1") == ["group-0000.t0000.state"]
    assert load(tmp_path, 0, "v5").pending.equals(state(1).pending)


def test_a_file_that_does_not_match_its_manifest_is_refused(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    commit(tmp_path, "v1", "v2", {0: state(1)})
    path = Path(version_dir(str(tmp_path), "v1")) / "group-0000.t0000.state"
    path.write_bytes(encode_group(0, state(5)))  # a valid file, other content
    with pytest.raises(StateError, match=r"group-0000\.t0000\.state is intact but is not the "
                                         r"file the manifest of version v1 names"):
        load(tmp_path, 0, "v2")


def test_a_corrupt_manifest_names_the_file(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    (name,) = manifest_names(version_dir(str(tmp_path), "v1"))
    manifest = Path(version_dir(str(tmp_path), "v1")) / name
    manifest.write_bytes(manifest.read_bytes().replace(b'"v1"', b'"v9"', 1))
    with pytest.raises(StateError, match=r"_manifest-t0000\.json is corrupt \(truncated or "
                                         r"damaged"):
        FileStateStore(str(tmp_path)).entries("v1")


def test_state_of_another_group_is_refused(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {1: state(1), 2: state(2)})
    directory = Path(version_dir(str(tmp_path), "v1"))
    other = encode_group(1, state(2))
    (directory / "group-0002.t0000.state").write_bytes(other)
    files = FileStateStore(str(tmp_path), cache=None)
    entry = files.entries("v1")[2]
    with pytest.raises(StateError, match=r"group-0002\.t0000\.state holds partition group 1, "
                                         r"not 2"):
        files.get(2, entry)


def test_a_query_without_a_budget_restores_the_default(tmp_path: Path) -> None:
    """The cache is per worker: a small budget of an earlier query must not stay in force."""
    cache = GroupCache()
    FileStateStore(str(tmp_path), cache, cache_budget=2048)
    assert cache.budget == 2048
    FileStateStore(str(tmp_path / "other"), cache)
    assert cache.budget == DEFAULT_BUDGET


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_a_damaged_file_is_reported_although_the_cache_holds_its_state(
        tmp_path: Path, how: str) -> None:
    """The cache must not hide a damaged checkpoint: its file changed, so the file is read."""
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1, 2, 3)}, cache)
    path = Path(version_dir(str(tmp_path), "v1")) / "group-0000.t0000.state"
    data = bytearray(path.read_bytes())
    damaged = data[: len(data) // 2] if how == "truncate" else data[:-1] + bytes([data[-1] ^ 1])
    path.write_bytes(bytes(damaged))
    with pytest.raises(StateError, match=str(path)):
        load(tmp_path, 0, "v1", cache)


@pytest.mark.parametrize(("how", "reason"), [
    ("truncate", "truncated or damaged: its content does not match its checksum"),
    ("flip", "truncated or damaged: its content does not match its checksum"),
    ("cut", "not a spark_stream_sched snapshot: bad magic, or truncated to 7 bytes"),
])
@pytest.mark.parametrize("cached", [False, True])
def test_a_corrupt_state_file_is_called_corrupt_first(tmp_path: Path, how: str, reason: str,
                                                     cached: bool) -> None:
    """Before, a truncated file was 'state file ... does not match its manifest', which reads as
    a checkpoint or manifest mismatch; the file is named first, with what to do."""
    cache = GroupCache() if cached else None
    commit(tmp_path, None, "v1", {0: state(1, 2, 3)}, cache)
    path = Path(version_dir(str(tmp_path), "v1")) / "group-0000.t0000.state"
    data = path.read_bytes()
    damaged = {"truncate": data[: len(data) // 2], "cut": data[:7],
               "flip": data[:40] + bytes([data[40] ^ 1]) + data[41:]}[how]
    path.write_bytes(damaged)
    os.utime(path, ns=(1, 1))  # another stamp than the one cached
    with pytest.raises(StateError) as info:
        load(tmp_path, 0, "v1", cache)
    assert str(info.value).splitlines()[0] == (
        f"state file {path} is corrupt ({reason}): partition group 0 cannot be loaded; restore "
        f"the file from a backup of the stateLocation and restart the query; without one, "
        f"start the query with a new checkpointLocation and stateLocation, which recomputes "
        f"every result from the inputs")
    with pytest.raises(StateError):  # and a corrupt file is never cached
        load(tmp_path, 0, "v1", cache)
