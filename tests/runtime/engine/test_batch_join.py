"""What a join does in a micro-batch: its per-batch figures and where its spill files live.

Two batches of a two-input join with ``budget=0`` (every memory part goes to disk after each
update): the first holds input 0's rows of key ``a`` (and an unrelated row of input 1, so both
inputs have rows), the second input 1's rows of key ``a``. Every result pairs a pushed tuple
with a later one, so the clean-up stage at the end of input produces all of them: the oracle is
the number of pairs within ``within``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.options.source import spill_option
from spark_stream_sched.runtime.engine.batch import GroupedBatch
from spark_stream_sched.runtime.keyed import join_state
from spark_stream_sched.runtime.packets import TS_MAX
from spark_stream_sched.runtime.query import QuerySpec

from ..strategies import SCHEMA
from .test_batch import MemoryStore, with_ids

SPEC = QuerySpec(2, 0, 0, (), key_columns=("k",), partition_groups=2,
                 operators=("join(2, within=2 seconds, budget=0)",))
FIRST = [(0, "a"), (100, "a"), (200, "a")]      # input 0, batch 1
OTHER = [(50, "b")]                             # input 1, batch 1: no partner
SECOND = [(1100, "a"), (1500, "a"), (2150, "a")]  # input 1, batch 2


def _rows(pairs: list[tuple[int, str]]) -> pa.Table:
    n = len(pairs)
    return pa.table({"ts": pa.array([t for t, _ in pairs], pa.int64()),
                     "k": [k for _, k in pairs], "g": pa.array([0] * n, pa.int64()),
                     "v": [1.0] * n, "i": pa.array(range(n), pa.int64()),
                     "s": ["x"] * n}).cast(SCHEMA)


def _pairs_within(window_ms: int) -> int:
    """Oracle: pairs (input 0 row, input 1 row) of key ``a`` at most ``window_ms`` apart."""
    return sum(1 for t0, _ in FIRST for t1, _ in SECOND if abs(t1 - t0) <= window_ms)


def _two_batches(spill: str | None) -> list[dict[str, object]]:
    store, metrics = MemoryStore(), []
    batch = GroupedBatch(SPEC, SCHEMA, (0, 1), spill_location=spill)
    first = pa.concat_tables([with_ids(_rows(FIRST), 0, 0), with_ids(_rows(OTHER), 1, 0)])
    one = batch.run(first, store, None, 1000)
    metrics.append({**one.metrics, "rows_out": one.output.num_rows})
    two = batch.run(with_ids(_rows(SECOND), 1, len(OTHER)), store, 1000, TS_MAX)
    metrics.append({**two.metrics, "rows_out": two.output.num_rows})
    return metrics


def test_a_batch_reports_what_its_joins_pushed_and_cleaned_up(tmp_path: Path) -> None:
    one, two = _two_batches(str(tmp_path / "spill"))
    expected = _pairs_within(2000)
    assert expected == 7  # the oracle is not vacuous: 2150 - 0 and 2150 - 100 are too far
    assert (one["rows_out"], one["join_cleanup_results"]) == (0, 0)
    assert one["join_pushes"] >= 1
    assert one["join_pushed_bytes"] > 0
    assert two["rows_out"] == expected == two["join_cleanup_results"]
    assert two["join_cleanups"] >= 1
    assert two["join_cleanup_seconds"] > 0
    assert isinstance(two["join_cleanup_seconds"], float)


def _recording_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every spill file written, and whether it existed right after its write."""
    written: list[tuple[str, bool]] = []
    original = join_state.write_snapshot

    def write(path: str, *args: object, **kwargs: object) -> None:
        original(path, *args, **kwargs)  # type: ignore[arg-type]
        written.append((path, os.path.isfile(path)))
    monkeypatch.setattr(join_state, "write_snapshot", write)
    return written


def test_spill_files_live_under_spill_location_and_go_when_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _recording_writes(monkeypatch)
    spill = tmp_path / "spill"
    _two_batches(str(spill))
    assert written
    assert all(present for _, present in written)
    assert {Path(p).parent.parent for p, _ in written} == {spill}
    assert all(Path(p).parent.name.startswith("join-spill-") for p, _ in written)
    assert list(spill.iterdir()) == []  # files and their directories removed


def test_spill_files_default_to_the_system_temp_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _recording_writes(monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _two_batches(None)
    assert written
    assert {Path(p).parent.parent for p, _ in written} == {tmp_path}
    assert list(tmp_path.iterdir()) == []


def test_spill_location_option_is_absolute_and_a_directory(tmp_path: Path) -> None:
    assert spill_option({}) is None
    assert spill_option({"spillLocation": f" {tmp_path} "}) == str(tmp_path)
    with pytest.raises(ConfigError, match="spillLocation='spill' must be an absolute path"):
        spill_option({"spillLocation": "spill"})
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        spill_option({"spillLocation": str(tmp_path / "file")})
