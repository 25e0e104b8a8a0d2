"""The source reads only the input columns its query uses (``SourcePlan.read_schema``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.inputs.offsets import parse_offset, version_id
from spark_stream_sched.inputs.plan import build_plan
from spark_stream_sched.runtime.state.files import FileStateStore
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from .datagen import make_stream, write_stream
from .helpers import WINDOW, assert_matches_oracle, output_key, source_options
from .test_reader import make_reader, run_batches

#: Aggregates that read ``value`` only: ``kind`` and ``note`` are not used.
VALUE_ONLY = "count(*) as n, avg(value) as mean, first(value) as first_v, last(value) as last_v"


def with_note(table: pa.Table, seed: int) -> pa.Table:
    """``table`` plus a string column no query of this file aggregates."""
    rng = np.random.default_rng(seed)
    return table.append_column("note", pa.array(rng.integers(0, 10**9, table.num_rows)
                                                 .astype(str)))


def write_noted(root: Path, n_inputs: int = 3, rows: int = 300, fmt: str = "parquet"
                ) -> list[pa.Table]:
    """Inputs of :func:`make_stream` rows with the extra ``note`` column; their tables."""
    tables = [with_note(make_stream(7, j, rows + 29 * j), j) for j in range(n_inputs)]
    for j, table in enumerate(tables):
        write_stream(table, os.path.join(root, f"in{j}"), 3 + j, fmt=fmt)
    return tables


def oracle(tables: list[pa.Table], aggregates: str) -> list[dict[str, object]]:
    return reference_aggregate(tables, WindowSpec.parse(WINDOW, "5s"), ["meter"], aggregates)


@pytest.mark.parametrize(("extra", "read"), [
    ({}, ["ts", "meter", "value"]),
    ({"aggregates": VALUE_ONLY + ", count_where(kind = 'alarm') as alarms"},
     ["ts", "meter", "value", "kind"]),
    ({"where": "note != 'x'"}, ["ts", "meter", "value", "note"]),
    ({"operators": "delta(value) as change"}, ["ts", "meter", "value", "kind", "note"]),
])
def test_the_plan_reads_the_columns_of_the_windows_and_filters_and_every_column_for_operators(
        tmp_path, extra: dict[str, str], read: list[str]) -> None:
    write_noted(tmp_path)
    opts = source_options(str(tmp_path), 3, str(tmp_path / "state"),
                          **{"aggregates": VALUE_ONLY, **extra})
    plan = build_plan(opts)
    assert plan.read_schema.names == read
    assert [s.schema for s in plan.streams] == [plan.read_schema] * 3
    assert plan.input_schema.names == ["ts", "meter", "value", "kind", "note"]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
@pytest.mark.parametrize("split_rows", ["driver", "tasks"])
def test_a_column_the_query_does_not_use_is_neither_read_nor_checked(
        tmp_path, fmt: str, split_rows: str) -> None:
    """Results equal the oracle; one input's ``note`` holds integers, another's has none."""
    tables = write_noted(tmp_path, fmt=fmt)
    odd = tables[1].set_column(4, "note", pa.array(np.arange(tables[1].num_rows)))
    for path in Path(tmp_path, "in1").iterdir():
        path.unlink()
    write_stream(odd, str(tmp_path / "in1"), 4, fmt=fmt)
    for path in Path(tmp_path, "in2").iterdir():
        path.unlink()
    write_stream(tables[2].drop_columns(["note"]), str(tmp_path / "in2"), 2, fmt=fmt)
    reader = make_reader(source_options(str(tmp_path), 3, str(tmp_path / "state"), format=fmt,
                                        aggregates=VALUE_ONLY, splitRows=split_rows))
    batches = run_batches(reader, limit=ReadMaxRows(250))
    assert len(batches) > 2
    rows = sorted((r for b in batches for r in b), key=output_key)
    assert_matches_oracle(rows, oracle(tables, VALUE_ONLY))


def test_a_query_resumes_state_whose_pending_rows_hold_every_column(tmp_path) -> None:
    """State written by a release that read every column continues with fewer columns.

    The first batches run with the plan's read schema set to all input columns (what earlier
    releases read); their groups keep pending rows with ``kind`` and ``note``. A new reader
    on the same state reads three columns and must continue from those rows.
    """
    tables = write_noted(tmp_path)
    opts = source_options(str(tmp_path), 3, str(tmp_path / "state"), aggregates=VALUE_ONLY)
    before = make_reader(opts)
    before._plan.__dict__["read_schema"] = before._plan.input_schema  # an earlier release
    before.prepareForTriggerAvailableNow()
    start, batches = before.initialOffset(), []
    for _ in range(2):
        end = before.latestOffset(start, ReadMaxRows(200))
        batches.append([r for p in before.partitions(start, end) for b in before.read(p)
                        for r in b.to_pylist()])
        before.commit(end)
        start = end
    files = FileStateStore(str(tmp_path / "state"), cache=None)
    version = version_id(parse_offset(start, 3))
    pending = [files.get(g, e).pending for g, e in files.entries(version).items()
               if e is not None]
    kept = [p for p in pending if p is not None and p.num_rows]
    assert kept
    assert all("note" in p.schema.names for p in kept)
    before.stop()

    after = make_reader(opts)
    assert after._plan.read_schema.names == ["ts", "meter", "value"]
    after.prepareForTriggerAvailableNow()
    while True:
        end = after.latestOffset(start, ReadMaxRows(200))
        if end == start:
            break
        batches.append([r for p in after.partitions(start, end) for b in after.read(p)
                        for r in b.to_pylist()])
        after.commit(end)
        start = end
    rows = sorted((r for b in batches for r in b), key=output_key)
    assert_matches_oracle(rows, oracle(tables, VALUE_ONLY))
