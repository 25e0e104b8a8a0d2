"""The source's versioned partition-group state under stateLocation (pure: no JVM)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.state import versions
from spark_stream_sched.runtime.state.versions import GroupState

DEFINITION = {"partition_groups": 16, "n_inputs": 2, "timestamp_column": "ts",
              "key_columns": ["k"], "window_ms": 1000, "slide_ms": 1000,
              "aggregates": ["count(*) as n"]}


def test_save_load_round_trip(tmp_path) -> None:
    pending = pa.table({"ts": pa.array([1, 2], pa.int64())})
    versions.save_groups(str(tmp_path), "v1", {3: GroupState(pending, b"\x00window"),
                                               4: GroupState()}, {})
    loaded = versions.load_group(str(tmp_path), 3, "v1")
    assert loaded.pending.equals(pending)
    assert loaded.window == b"\x00window"
    assert versions.load_group(str(tmp_path), 4, "v1") == GroupState()
    assert sorted(os.listdir(versions.version_dir(str(tmp_path), "v1"))) == [
        "group-0003.state", "group-0004.state"]  # no temporary files left behind


def test_missing_state_names_path_and_remedy(tmp_path) -> None:
    with pytest.raises(StateError, match=r"partition group 4 .* is missing: .*v9/group-0004"
                                         r"\.state; the stateLocation does not match"):
        versions.load_group(str(tmp_path), 4, "v9")


def test_corrupt_state_is_detected(tmp_path) -> None:
    versions.save_groups(str(tmp_path), "v1", {0: GroupState(None, b"abc")}, {})
    path = versions.version_path(str(tmp_path), 0, "v1")
    with open(path, "rb") as fh:
        data = bytearray(fh.read())
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as fh:
        fh.write(bytes(data))
    with pytest.raises(StateError, match=r"state file .*v1/group-0000\.state is corrupt "
                                         r"\(snapshot checksum mismatch"):
        versions.load_group(str(tmp_path), 0, "v1")


def test_state_of_another_group_is_refused(tmp_path) -> None:
    versions.save_groups(str(tmp_path), "v1", {1: GroupState()}, {})
    os.rename(versions.version_path(str(tmp_path), 1, "v1"),
              versions.version_path(str(tmp_path), 2, "v1"))
    with pytest.raises(StateError, match="holds group 1"):
        versions.load_group(str(tmp_path), 2, "v1")


def test_prune_keeps_committed_newer_and_a_few_older(tmp_path) -> None:
    for v in ("000-a", "001-b", "002-c", "003-d", "004-e"):
        versions.save_groups(str(tmp_path), v, {0: GroupState()}, {})
    assert versions.prune(str(tmp_path), "003-d", keep_older=2) == 1
    names = sorted(os.listdir(os.path.join(str(tmp_path), "versions")))
    assert names == ["001-b", "002-c", "003-d", "004-e"]


def test_partition_group_change_is_refused(tmp_path) -> None:
    versions.record_query(str(tmp_path), DEFINITION)
    versions.record_query(str(tmp_path), DEFINITION)  # same definition: fine
    with pytest.raises(ConfigError, match=r"partitionGroups is 8 but the query under "
                                          r"stateLocation .* was started with 16"):
        versions.record_query(str(tmp_path), DEFINITION | {"partition_groups": 8})
