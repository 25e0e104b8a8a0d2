"""Option ``idleTimeout``: a silent input stops holding back the windows, deterministically.

The reader is driven directly (no JVM) with a fake driver clock that advances 10 s per
micro-batch and an admission limit, so input 0 keeps delivering over many batches while input 1
sends only its first seconds of data and then falls silent. Without ``idleTimeout`` the ready
bound stays at input 1's last ts and later windows never close; with it, the driver records
``idle`` in the end offset once input 1 has been quiet for the timeout, and the bound follows
input 0.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow.compute as pc
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import InputError
from spark_stream_sched.inputs.offsets import parse_offset

from .datagen import make_stream, write_stream
from .helpers import assert_matches_oracle, expected_rows, output_key, source_options
from .test_reader import make_reader


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def setup(tmp_path: Any, **extra: str) -> tuple[Any, FakeClock, list[Any]]:
    busy = make_stream(5, 0, 400)
    quiet = make_stream(5, 1, 400)
    quiet = quiet.filter(pc.less(quiet.column("ts"), busy.column("ts")[40]))  # goes silent
    write_stream(busy, str(tmp_path / "in" / "in0"), 4)
    write_stream(quiet, str(tmp_path / "in" / "in1"), 1)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"),
                          endOfInput="never", **extra)
    reader = make_reader(opts)
    clock = FakeClock()
    reader.driver.clock = clock
    return reader, clock, [busy, quiet]


def run(reader: Any, clock: FakeClock, start: dict | None = None,
        batches: int = 12) -> tuple[dict, list[dict], list[dict]]:
    """Up to ``batches`` micro-batches of at most 60 rows, 10 s apart on the driver clock."""
    start = start or reader.initialOffset()
    offsets, rows = [start], []
    for _ in range(batches):
        end = reader.latestOffset(start, ReadMaxRows(60))
        clock.now += 10
        if end == start:
            continue
        rows += [r for p in reader.partitions(start, end) for b in reader.read(p)
                 for r in b.to_pylist()]
        reader.commit(end)
        offsets.append(end)
        start = end
    return start, offsets, sorted(rows, key=output_key)


def test_quiet_input_holds_back_windows_without_idle_timeout(tmp_path) -> None:
    reader, clock, tables = setup(tmp_path)
    end, _, rows = run(reader, clock)
    quiet_last = tables[1].column("ts")[-1].as_py()
    assert parse_offset(end, 2).ready_bound() == quiet_last
    assert max(r["window_end"] for r in rows) <= quiet_last
    assert_matches_oracle(rows, [r for r in expected_rows(tables)
                                 if r["window_end"] <= quiet_last])


def test_idle_input_is_recorded_and_releases_the_windows(tmp_path) -> None:
    reader, clock, tables = setup(tmp_path, idleTimeout="30 seconds")
    end, offsets, rows = run(reader, clock)
    idle_flags = [parse_offset(o, 2).cursors[1].idle for o in offsets]
    assert idle_flags[1] is False  # input 1 delivered in the first batch
    assert idle_flags[-1] is True  # and was recorded idle once quiet for 30 s
    busy_last = tables[0].column("ts")[-1].as_py()
    assert parse_offset(end, 2).ready_bound() == busy_last
    expected = [r for r in expected_rows(tables) if r["window_end"] <= busy_last]
    assert max(r["window_end"] for r in rows) > tables[1].column("ts")[-1].as_py()
    assert_matches_oracle(rows, expected)
    # Recorded, hence deterministic: replaying the batches from their offsets gives the same.
    replay = [r for a, b in zip(offsets, offsets[1:], strict=False)
              for p in reader.partitions(a, b) for batch in reader.read(p)
              for r in batch.to_pylist()]
    assert sorted(replay, key=output_key) == rows


def add_late_rows(tmp_path: Any, start: dict) -> None:
    """A file of input 1 whose rows are later than its data but below the ready bound."""
    late = make_stream(5, 1, 400).slice(200, 10)
    assert late.column("ts")[0].as_py() < parse_offset(start, 2).ready_bound()
    write_stream(late, str(tmp_path / "late"), 1)
    os.rename(tmp_path / "late" / "part-00000.parquet",
              tmp_path / "in" / "in1" / "part-00001.parquet")


@pytest.mark.parametrize("split_rows", ["driver", "tasks"])
@pytest.mark.parametrize("policy", ["fail", "drop"])
def test_late_rows_of_a_formerly_idle_input(tmp_path, policy: str, split_rows: str) -> None:
    reader, clock, tables = setup(tmp_path, idleTimeout="30 seconds", outOfOrder=policy,
                                  splitRows=split_rows)
    start, _, rows = run(reader, clock)
    add_late_rows(tmp_path, start)
    if policy == "fail":
        with pytest.raises(InputError, match="late row at position .* below the ready bound"):
            run(reader, clock, start, batches=1)
        return
    end, _, more = run(reader, clock, start, batches=1)
    assert parse_offset(end, 2).cursors[1].idle is False  # active again
    assert more == []  # the late rows were dropped; no window changed or reopened


def test_a_late_row_fails_with_the_same_error_wherever_the_rows_are_split(tmp_path) -> None:
    """``splitRows=tasks``: the task refuses the batch's first late row, as the driver does."""
    errors = []
    for split_rows in ("driver", "tasks"):
        root = tmp_path / split_rows
        reader, clock, _ = setup(root, idleTimeout="30 seconds", splitRows=split_rows)
        start, _, _ = run(reader, clock)
        add_late_rows(root, start)
        with pytest.raises(InputError) as failure:
            run(reader, clock, start, batches=1)
        errors.append(str(failure.value))
    assert errors[0] == errors[1]
