"""A spilling join through Spark on a disk that fills up mid-run, then freed and restarted.

The 3-way join of ``test_join_adaptation`` (``adaptation=lazy-disk``, ``stateMemoryBudget=2k``:
groups move and join state is pushed to disk) keeps its state on a real 4 MiB tmpfs. After
batch 2 the disk is filled to the last byte (hard links keep the blocks of every state file
written so far, so pruning frees nothing). The next batch must fail the query with the
plugin's ``SpillError`` naming the file it could not write on that disk, and nothing may be
lost: once the space is freed, the restart from the same checkpoint gives, batch for batch, the
output of an uninterrupted run on a roomy disk.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.testing import faults

from .helpers import run_to_end
from .test_join_adaptation import canonical, options, records, write_inputs

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _query(spark: Any, opts: dict[str, str], checkpoint: Path,
           batches: dict[int, list[str]], after: Any = None) -> Any:
    def collect(df: Any, batch_id: int) -> None:
        batches[batch_id] = canonical([r.asDict() for r in df.collect()])
        if after is not None:
            after(batch_id)

    return (spark.readStream.format("ordered-agg").options(**opts).load().writeStream
            .foreachBatch(collect).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def test_join_state_on_a_full_disk_fails_clearly_and_restarts_without_loss(
        spark: Any, tmp_path: Path, disk_of_4m: Path) -> None:
    small_disk = disk_of_4m
    write_inputs(tmp_path)
    clean: dict[int, list[str]] = {}
    assert run_to_end(_query(spark, options(tmp_path, tmp_path / "clean-state"),
                              tmp_path / "ckpt-clean", clean)) is None
    assert len(clean) > 4
    used = sum(p.stat().st_size for p in (tmp_path / "clean-state").rglob("*") if p.is_file())
    assert used < 2 << 20, f"the clean run's state ({used} B) would not fit the 4 MiB disk"

    state, kept, filler = small_disk / "state", small_disk / "kept", []

    def fill_after_batch_two(batch_id: int) -> None:
        if batch_id == 2:
            for path in [p for p in state.rglob("*") if p.is_file()]:
                link = kept / path.relative_to(state)
                link.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, link)
            filler.append(faults.fill_disk(small_disk))

    batches: dict[int, list[str]] = {}
    opts = options(tmp_path, state)
    error = run_to_end(_query(spark, opts, tmp_path / "ckpt", batches, fill_after_batch_two))
    assert error is not None, "the join ran on with a full disk"
    # The first write that finds no space fails: the batch's assignment record (driver,
    # planning) or a task's group state, depending on which comes first; either names its file.
    line = next((ln.strip() for ln in str(error).splitlines()
                 if "spark_stream_sched.errors.SpillError: " in ln), "")
    print(f"\nfull disk: {line}")
    assert f"spark_stream_sched.errors.SpillError: cannot write {state}/" in line, str(error)
    assert "No space left on device" in line
    assert sorted(batches) == [0, 1, 2]

    filler[0].unlink()  # space again
    shutil.rmtree(kept)
    assert run_to_end(_query(spark, opts, tmp_path / "ckpt", batches)) is None
    assert batches == clean
    assert any(r.pushes for r in records(state)), "no join state was pushed to disk"
