"""The source's per-batch join figures after a spilling run, driven as Spark's runner would.

A three-input join with ``budget=0`` pushes every memory part to disk after each batch, so every
result that pairs rows of different batches comes from the clean-up stage; the run's results
must still equal the oracle, the batches' metrics must add up to what the join did, and its
spill files must have lived under ``spillLocation`` and be gone at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.progress import format_line, source_progress
from spark_stream_sched.runtime.keyed import join_state
from spark_stream_sched.runtime.query import spec_from_options
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

from .helpers import drive_batches
from .test_adaptation_source import canonical, reader_for, write_join_inputs

SPILLING = {"keyColumns": "meter", "operators": "join(3, within=3 seconds, budget=0)"}


def test_a_spilling_run_reports_its_clean_up_and_spills_under_spill_location(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []
    original = join_state.write_snapshot

    def write(path: str, *args: Any, **kwargs: Any) -> None:
        original(path, *args, **kwargs)
        written.append(path)
    monkeypatch.setattr(join_state, "write_snapshot", write)
    tables = write_join_inputs(tmp_path)
    spill = tmp_path / "spill"
    reader = reader_for(tmp_path, spillLocation=str(spill), **SPILLING)
    rows, planned = drive_batches(reader, 150)
    expected = reference_pipeline(tables, spec_from_options(SPILLING, 3))
    assert canonical(rows) == canonical(expected)
    batches = source_progress(str(tmp_path / "state"))
    assert len(batches) == len(planned) > 3
    cleaned = sum(b["join_cleanup_results"] for b in batches)
    assert 0 < cleaned < len(expected)  # some results paired rows of one batch, some did not
    assert all(b["join_pushed_bytes"] > 0 for b in batches[:-1])
    assert sum(b["join_cleanup_seconds"] for b in batches) > 0
    assert any(", join: " in format_line(b) for b in batches)
    assert written
    assert {Path(p).parent.parent for p in written} == {spill}
    assert list(spill.iterdir()) == []
