"""Admission by Parquet row groups (``splitRows=tasks``): the driver reads footers, not rows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import OutOfOrderError
from spark_stream_sched.inputs import cursors as cursors_module
from spark_stream_sched.inputs.cursors import advance_to
from spark_stream_sched.inputs.offsets import parse_offset
from spark_stream_sched.inputs.row_groups import admit_row_groups
from spark_stream_sched.inputs.streams import Cursor, InputStream
from spark_stream_sched.runtime.packets import event_times

from .datagen import make_stream
from .helpers import assert_matches_oracle, expected_rows, output_key, source_options
from .test_reader import make_reader, run_batches, write_out_of_order_inputs

TS_TYPES = {"int64": pa.int64(), "int32": pa.int32(), "s": pa.timestamp("s"),
            "ms": pa.timestamp("ms"), "us": pa.timestamp("us"), "ns": pa.timestamp("ns")}


def write_groups(directory: Path, table: pa.Table, file_rows: list[int], group_rows: int,
                 statistics: bool = True) -> list[str]:
    """``table`` as Parquet files of ``file_rows`` rows, each cut into row groups."""
    directory.mkdir(parents=True)
    paths, at = [], 0
    for i, n in enumerate(file_rows):
        path = str(directory / f"part-{i:05d}.parquet")
        pq.write_table(table.slice(at, n), path, row_group_size=group_rows,
                       write_statistics=statistics)
        paths.append(path)
        at += n
    return paths


def rows_between(start: Any, end: Any, n_inputs: int) -> int:
    """Rows Spark's offsets ``start`` .. ``end`` admit over all inputs."""
    return sum(b.seq - a.seq for a, b in zip(parse_offset(start, n_inputs).cursors,
                                             parse_offset(end, n_inputs).cursors, strict=True))


def cuts(sizes: list[int], group: int) -> list[int]:
    """Positions in the input (0-based) where a row group starts, and the input's end."""
    out, at = {0}, 0
    for n in sizes:
        out.update(at + k for k in range(0, n, group))
        at += n
        out.add(at)
    return sorted(out)


@st.composite
def streams(draw: Any) -> tuple[str, list[tuple[list[int], list[int], int]], int | None]:
    """A timestamp type; per input sorted times, file sizes, group size; a budget."""
    kind = draw(st.sampled_from(sorted(TS_TYPES)))
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        steps = draw(st.lists(st.integers(0, 3000), max_size=60))
        times = list(np.cumsum(steps) - 1500) if kind != "int32" else list(np.cumsum(steps))
        sizes, left = [], len(times)
        while left:
            n = draw(st.integers(1, left))
            sizes.append(n)
            left -= n
        inputs.append(([int(t) for t in times], sizes, draw(st.integers(1, 12))))
    return kind, inputs, draw(st.none() | st.integers(1, 40))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=streams())
def test_row_groups_are_admitted_whole_earliest_first_within_the_budget(
        tmp_path_factory: Any, case: tuple[str, list[Any], int | None]) -> None:
    kind, inputs, budget = case
    root = tmp_path_factory.mktemp("groups")
    streams_, files, times = [], [], []
    for j, (ts, sizes, group) in enumerate(inputs):
        table = pa.table({"ts": pa.array(ts, TS_TYPES[kind]), "v": list(range(len(ts)))})
        files.append(write_groups(root / f"in{j}", table, sizes, group))
        streams_.append(InputStream(j, str(root / f"in{j}"), "parquet", table.schema))
        times.append(event_times(table, "ts", "test"))  # as the read path converts them
    bounds = [cuts(sizes, group) for _, sizes, group in inputs]
    at = [Cursor() for _ in inputs]
    while any(c.seq < len(t) for c, t in zip(at, times, strict=True)):
        waiting = []  # (reached time, input, rows) of every input's next row group
        for j, (c, t) in enumerate(zip(at, times, strict=True)):
            if c.seq < len(t):
                stop = min(b for b in bounds[j] if b > c.seq)
                high = int(t[c.seq:stop].max())
                waiting.append((high if c.last_ts is None else max(c.last_ts, high), j,
                                stop - c.seq))
        admitted = admit_row_groups(streams_, files, at, budget, "ts")
        if admitted is None:  # only when the earliest row group alone exceeds the budget
            assert budget is not None
            assert min(waiting)[2] > budget
            return
        assert 0 < sum(a.rows for a in admitted) <= (budget or len(times) * 10_000)
        after = [advance_to(s, f, c, a.rows, a.last_ts, False)
                 for s, f, c, a in zip(streams_, files, at, admitted, strict=True)]
        for j, (end, t) in enumerate(zip(after, times, strict=True)):
            assert end.last_ts == (int(t[: end.seq].max()) if end.seq else None)
            assert end.seq in bounds[j]  # whole row groups
        # earliest first: every admitted row group is reached no later than any waiting one
        admitted_max = max(e.last_ts for e, c in zip(after, at, strict=True) if e.seq > c.seq)
        for j, (end, t) in enumerate(zip(after, times, strict=True)):
            if end.seq < len(t):
                stop = min(b for b in bounds[j] if b > end.seq)
                assert admitted_max <= max(end.last_ts or admitted_max, int(t[end.seq:stop].max()))
        if budget is None:
            assert all(e.seq == len(t) for e, t in zip(after, times, strict=True))
        at = after


def test_a_source_over_row_groups_reads_no_timestamp_on_the_driver(tmp_path, monkeypatch) -> None:
    tables = [make_stream(3, j, 300 + 37 * j) for j in range(3)]
    for j, table in enumerate(tables):
        write_groups(tmp_path / "in" / f"in{j}", table, [120, 80, table.num_rows - 200], 25)
    reference = [r for b in run_batches(make_reader(source_options(
        str(tmp_path / "in"), 3, str(tmp_path / "ref"), maxRecordsPerTrigger=0))) for r in b]

    def no_reading(*args: Any) -> Any:
        raise AssertionError(f"the driver read timestamps: {args[1]}")

    monkeypatch.setattr(cursors_module, "_read_times", no_reading)
    reader = make_reader(source_options(str(tmp_path / "in"), 3, str(tmp_path / "s"),
                                        splitRows="tasks", numPartitions=2))
    reader.prepareForTriggerAvailableNow()
    start, rows, sizes = reader.initialOffset(), [], []
    for limit in [60, 25, 100, 51, 1000]:  # 25: one row group; below it: by rows, see below
        end = reader.latestOffset(start, ReadMaxRows(limit))
        sizes.append(rows_between(start, end, 3))
        rows += sorted((r for p in reader.partitions(start, end) for b in reader.read(p)
                        for r in b.to_pylist()), key=output_key)
        reader.commit(end)
        start = end
    assert sizes == [50, 25, 100, 50, sum(t.num_rows for t in tables) - 225]
    assert rows == reference
    assert_matches_oracle(rows, expected_rows(tables))


def test_a_budget_below_one_row_group_is_admitted_by_rows(tmp_path) -> None:
    tables = [make_stream(4, j, 90) for j in range(2)]
    for j, table in enumerate(tables):
        write_groups(tmp_path / "in" / f"in{j}", table, [90], 30)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "s"), splitRows="tasks")
    reader = make_reader(opts)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(7))
    assert rows_between(start, end, 2) == 7  # to the row, timestamps read
    rows = [r for b in run_batches(make_reader(opts | {"stateLocation": str(tmp_path / "t")}),
                                   limit=ReadMaxRows(7)) for r in b]
    assert_matches_oracle(sorted(rows, key=output_key), expected_rows(tables))


def test_files_without_statistics_are_admitted_by_rows(tmp_path) -> None:
    tables = [make_stream(5, j, 120) for j in range(2)]
    for j, table in enumerate(tables):
        write_groups(tmp_path / "in" / f"in{j}", table, [120], 40, statistics=False)
    reader = make_reader(source_options(str(tmp_path / "in"), 2, str(tmp_path / "s"),
                                        splitRows="tasks"))
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(50))
    assert rows_between(start, end, 2) == 50  # not whole groups of 40


def test_a_row_out_of_order_inside_a_row_group_fails_in_the_tasks_with_the_drivers_error(
        tmp_path) -> None:
    write_out_of_order_inputs(tmp_path)
    on_driver = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "s1"),
                                           splitRows="driver"))
    with pytest.raises(OutOfOrderError) as driver_error:
        on_driver.latestOffset(on_driver.initialOffset(), on_driver.getDefaultReadLimit())
    in_tasks = make_reader(source_options(str(tmp_path), 2, str(tmp_path / "s2"),
                                          splitRows="tasks"))
    start = in_tasks.initialOffset()
    end = in_tasks.latestOffset(start, in_tasks.getDefaultReadLimit())  # footers only
    parts = in_tasks.partitions(start, end)
    with pytest.raises(OutOfOrderError) as task_error:
        [b for part in parts for b in in_tasks.read(part)]  # noqa: B018 - read them all
    assert str(task_error.value).splitlines()[0] == str(driver_error.value).splitlines()[0]


PLAN_ONE_BATCH = """
import json, sys
from spark_stream_sched.spark.datasource import OrderedAggDataSource
source = OrderedAggDataSource(json.loads(sys.argv[1]))
reader = source.streamReader(source.schema())
start = reader.initialOffset()
end = reader.latestOffset(start, reader.getDefaultReadLimit())
assert end != start and reader.partitions(start, end)
print(sorted(name for name in ("pandas", "pyarrow.dataset") if name in sys.modules))
"""


@pytest.mark.parametrize(("split_rows", "imported"), [("tasks", "[]"), ("driver", "['pandas']")])
def test_the_driver_plans_a_batch_over_row_groups_without_importing_pandas(
        tmp_path, split_rows: str, imported: str) -> None:
    """pyarrow imports pandas (0.26 s of CPU) the first time it builds an array; a driver that
    reads no row must build none (the driver split reads rows, so it imports it)."""
    import json
    import subprocess
    import sys

    for j in range(2):
        write_groups(tmp_path / "in" / f"in{j}", make_stream(6, j, 200), [100, 100], 50)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "s"), splitRows=split_rows)
    here = str(Path(__file__).resolve().parents[2])  # this checkout's package, not another
    done = subprocess.run([sys.executable, "-c", PLAN_ONE_BATCH, json.dumps(opts)],
                          capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, "PYTHONPATH": here})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == imported
