"""Incremental group state with manifests and the worker cache (pure: no JVM).

The source's state-store mapping (docs/state_store.md): a batch writes files only for the groups
whose state changed, a manifest per task names where every group's current file is, pruning
keeps what a kept manifest names, and the worker's cache answers only for the exact version and
content the checkpoint holds — so it can make a batch faster, never different.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state import manifests, versions
from spark_stream_sched.runtime.state.group_cache import GroupCache
from spark_stream_sched.runtime.state.group_store import IncrementalGroupStore
from spark_stream_sched.runtime.state.versions import GroupState


def state(*values: int) -> GroupState:
    return GroupState(pa.table({"ts": pa.array(list(values), pa.int64())}), b"w" * len(values))


def commit(root: Path, start: str | None, end: str, states: dict[int, GroupState],
           cache: GroupCache | None = None, task: int = 0) -> IncrementalGroupStore:
    """One task's batch: load every group at ``start``, save ``states`` as ``end``."""
    store = IncrementalGroupStore(str(root), start, end, task, cache)
    for group in states:
        store.load(group)
    store.save(states, {"bound": 1})
    return store


def files(root: Path, version: str) -> list[str]:
    return sorted(n for n in os.listdir(versions.version_dir(str(root), version))
                  if n.startswith("group-"))


def test_only_changed_groups_get_a_file_and_the_manifest_points_back(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1), 1: state(2)})
    store = commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2, 3)})
    assert files(tmp_path, "v1") == ["group-0000.state", "group-0001.state"]
    assert files(tmp_path, "v2") == ["group-0001.state"]  # group 0 did not change
    assert store.metrics["state_files_written"] == 1
    assert store.metrics["state_files_unchanged"] == 1
    loaded, entry, _ = versions.load_entry(str(tmp_path), 0, "v2")
    assert entry is not None
    assert entry.version == "v1"
    assert loaded.pending.equals(state(1).pending)
    assert loaded.window == b"w"
    assert versions.load_entry(str(tmp_path), 1, "v2")[0].window == b"ww"


def test_groups_of_several_tasks_form_one_version(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)}, task=0)
    commit(tmp_path, None, "v1", {1: state(2)}, task=1)
    manifest = manifests.read_manifest(versions.version_dir(str(tmp_path), "v1"), "v1")
    assert manifest is not None
    assert sorted(manifest) == [0, 1]
    # a group moves to task 0 in the next batch: found through task 1's manifest of v1
    commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2)}, task=0)
    assert versions.load_entry(str(tmp_path), 1, "v2")[1] == manifest[1]


def test_a_replayed_batch_rewrites_identical_files(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    commit(tmp_path, "v1", "v2", {0: state(1, 2)})
    first = (Path(versions.version_path(str(tmp_path), 0, "v2"))).read_bytes()
    manifest = Path(manifests.manifest_path(versions.version_dir(str(tmp_path), "v2"), 0))
    before = manifest.read_bytes()
    commit(tmp_path, "v1", "v2", {0: state(1, 2)})
    assert Path(versions.version_path(str(tmp_path), 0, "v2")).read_bytes() == first
    assert manifest.read_bytes() == before


def test_cache_hits_only_the_exact_version_and_content(tmp_path: Path) -> None:
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1), 1: state(2)}, cache)
    hit = commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2, 4)}, cache)
    assert (hit.metrics["state_cache_hits"], hit.metrics["state_cache_misses"]) == (2, 0)
    # a batch replayed from v1 after v2 was cached: the cache holds v2 only -> files
    replay = commit(tmp_path, "v1", "v2", {0: state(1), 1: state(2, 4)}, cache)
    assert (replay.metrics["state_cache_hits"], replay.metrics["state_cache_misses"]) == (0, 2)
    # another worker (or a restarted one) has an empty cache: the same states from the files
    other = IncrementalGroupStore(str(tmp_path), "v2", "v3", 0, GroupCache())
    cached = IncrementalGroupStore(str(tmp_path), "v2", "v3", 0, cache)
    for group in (0, 1):
        a, b = other.load(group), cached.load(group)
        assert a.pending.equals(b.pending)
        assert a.window == b.window
    assert other.metrics["state_cache_misses"] == 2
    assert cached.metrics["state_cache_hits"] == 2


def test_cache_is_not_trusted_when_the_checkpoint_differs(tmp_path: Path) -> None:
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1)}, cache)
    # the state directory replaced under the same path by another query's v1
    other = tmp_path / "other"
    commit(other, None, "v1", {0: state(7)})
    shutil.rmtree(versions.version_dir(str(tmp_path), "v1"))
    os.replace(versions.version_dir(str(other), "v1"), versions.version_dir(str(tmp_path), "v1"))
    store = IncrementalGroupStore(str(tmp_path), "v1", "v2", 0, cache)
    assert store.load(0).pending.equals(state(7).pending)
    assert store.metrics["state_cache_misses"] == 1
    # a lost checkpoint is an error even though the cache still holds the state
    commit(tmp_path, "v1", "v2", {0: state(7, 8)}, cache)
    os.unlink(versions.version_path(str(tmp_path), 0, "v2"))
    with pytest.raises(StateError, match=r"state of partition group 0 for version v2 is missing"):
        IncrementalGroupStore(str(tmp_path), "v2", "v3", 0, cache).load(0)


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
    assert versions.prune(str(tmp_path), "v5", keep_older=2) == 1  # v2 goes, v1 stays
    assert sorted(os.listdir(tmp_path / "versions")) == ["v1", "v3", "v4", "v5"]
    assert files(tmp_path, "v1") == ["group-0000.state"]  # group 1's old file and manifest go
    assert os.listdir(tmp_path / "versions" / "v1") == ["group-0000.state"]
    assert versions.load_entry(str(tmp_path), 0, "v5")[0].pending.equals(state(1).pending)


def test_a_file_that_does_not_match_its_manifest_is_refused(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    commit(tmp_path, "v1", "v2", {0: state(1)})
    path = versions.version_path(str(tmp_path), 0, "v1")
    Path(path).write_bytes(versions.encode_group(0, state(5)))  # a valid file, other content
    with pytest.raises(StateError, match=r"does not match the manifest of version v2"):
        versions.load_entry(str(tmp_path), 0, "v2")


def test_corrupt_manifest_and_unknown_group_name_the_file(tmp_path: Path) -> None:
    commit(tmp_path, None, "v1", {0: state(1)})
    with pytest.raises(StateError, match=r"group 3 for version v1 is missing: no manifest"):
        versions.load_entry(str(tmp_path), 3, "v1")
    manifest = Path(manifests.manifest_path(versions.version_dir(str(tmp_path), "v1"), 0))
    manifest.write_bytes(manifest.read_bytes().replace(b'"v1"', b'"v9"', 1))
    with pytest.raises(StateError, match=r"_manifest-task-0000\.json cannot be read"):
        versions.load_entry(str(tmp_path), 0, "v1")


def test_a_query_without_a_budget_restores_the_default(tmp_path: Path) -> None:
    """The cache is per worker: a small budget of an earlier query must not stay in force."""
    from spark_stream_sched.runtime.state.group_cache import DEFAULT_BUDGET

    cache = GroupCache()
    IncrementalGroupStore(str(tmp_path), None, "v1", 0, cache, cache_budget=2048)
    assert cache.budget == 2048
    IncrementalGroupStore(str(tmp_path / "other"), None, "v1", 0, cache)
    assert cache.budget == DEFAULT_BUDGET


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_a_damaged_file_is_reported_although_the_cache_holds_its_state(
        tmp_path: Path, how: str) -> None:
    """The cache must not hide a damaged checkpoint: its file changed, so the file is read."""
    cache = GroupCache()
    commit(tmp_path, None, "v1", {0: state(1, 2, 3)}, cache)
    path = versions.version_path(str(tmp_path), 0, "v1")
    data = bytearray(Path(path).read_bytes())
    damaged = data[: len(data) // 2] if how == "truncate" else data[:-1] + bytes([data[-1] ^ 1])
    with open(path, "wb") as fh:
        fh.write(damaged)
    with pytest.raises(StateError, match=str(path)):
        IncrementalGroupStore(str(tmp_path), "v1", "v2", 0, cache).load(0)
