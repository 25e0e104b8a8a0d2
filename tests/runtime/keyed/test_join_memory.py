"""The budgeted join's memory at its peak, by accounting (never by timing or RSS).

The join's own bytes are counted where they peak: the clean-up reads back one key slice of a
group at a time (its tuples at most the budget plus one key's), and the end-of-input release
merges the held runs without reading all of them; ``Join.stats["peak_bytes"]`` records the
most held at once. The output is checked against the batch oracle too.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.keyed import cleanup
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_merge import ORDER_MS, Part, merge, order_of
from spark_stream_sched.runtime.keyed.join_state import arrow_bytes
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.join_reference import reference_join

from .test_join import SCHEMA

BUDGET = 32 << 10


def big_join_rows(n: int, keys: int) -> pa.Table:
    """``n`` tuples per input, one per ms, keys drawn from ``keys`` values (seeded)."""
    rng = np.random.default_rng(7)
    ts = np.repeat(np.arange(n), 2)
    return pa.table({"ts": ts, INPUT_COL: pa.array(np.tile([0, 1], n), pa.int32()),
                     SEQ_COL: ts, "k": [f"k{x}" for x in rng.integers(0, keys, 2 * n)],
                     "g": np.zeros(2 * n, np.int64), "v": rng.random(2 * n),
                     "id": np.arange(2 * n)}, schema=SCHEMA)


def run_join(rows: pa.Table, tmp_path: str, budget: int) -> tuple[Join, list[pa.Table]]:
    """Feed ``rows`` in 500-row batches with their bounds, unwindowed, two partition groups."""
    op = Join(StageSpec("join", ("2",)), SCHEMA, ["k"], "ts", memory_budget=budget,
              spill_dir=tmp_path, n_groups=2)
    ts = np.asarray(rows.column("ts").to_numpy())
    out = [op.update(rows.slice(lo, 500), int(ts[lo + 500]) if lo + 500 < len(ts) else None)
           for lo in range(0, rows.num_rows, 500)]
    return op, out


def test_the_clean_up_reads_back_one_key_slice_at_a_time(tmp_path, monkeypatch) -> None:
    """Each group holds ~8 budgets of tuples on disk; every universe the clean-up matches
    is at most the budget plus one key's tuples (before: a whole group's generations)."""
    rows = big_join_rows(4000, 2000)
    op, out = run_join(rows, str(tmp_path), BUDGET)
    largest_group = max(sum(x.size for x in g.generations) for g in op._groups)
    assert largest_group > 5 * BUDGET
    sizes: list[int] = []
    real = cleanup.missing_results

    def counted(epochs: list[pa.Table], closed: int, shape: object) -> object:
        sizes.append(sum(arrow_bytes(e) for e in epochs if e.num_rows))
        return real(epochs, closed, shape)  # type: ignore[arg-type]

    monkeypatch.setattr(cleanup, "missing_results", counted)
    out.append(op.finish())
    key_rows = max(np.unique(rows.column("k").to_numpy(zero_copy_only=False),
                             return_counts=True)[1])
    one_key = key_rows * 69  # a stored row: 7 ints of 8 bytes, an int32, a key of <= 5 chars
    # slices are cut by the group's mean bytes per row, so a few % over the budget is allowed
    assert len(sizes) > 2 * len(op._groups)
    assert max(sizes) <= 1.05 * BUDGET + one_key
    assert pa.concat_tables(out).to_pylist() == reference_join(rows, ["k"], 2, None)
    assert os.listdir(tmp_path) == []


def test_the_joins_own_bytes_stay_within_a_few_budgets(tmp_path) -> None:
    """``peak_bytes``: state, the slice being cleaned up, its results and the final merge's
    loaded runs never exceed 4 budgets, though the state and the results are far larger."""
    rows = big_join_rows(4000, 2000)
    op, out = run_join(rows, str(tmp_path), BUDGET)
    parts = list(op.finish_parts())
    assert len(parts) > 10  # handed out in parts, never as one table
    result = pa.concat_tables([*out, *parts])
    assert result.to_pylist() == reference_join(rows, ["k"], 2, None)
    assert op.stats["pushed_bytes"] > 15 * BUDGET
    assert arrow_bytes(result) > 4 * BUDGET
    assert 0 < op.stats["peak_bytes"] <= 4 * BUDGET


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 1), st.integers(0, 9)),
                         max_size=12), max_size=6))
def test_merge_returns_every_row_in_order_loading_each_part_once(runs: list) -> None:
    """Sorted parts, overlapping at random: the merge equals one sort of all rows (the
    oracle), and a part is loaded only when the rows returned so far are all below it."""
    schema = pa.schema([(ORDER_MS, pa.int64()), (INPUT_COL, pa.int64()), (SEQ_COL, pa.int64()),
                        ("__order_seq_0", pa.int64())])
    tables = []
    for i, run in enumerate(r for r in runs if r):
        t = pa.Table.from_pylist([{ORDER_MS: m, INPUT_COL: inp, SEQ_COL: s, "__order_seq_0": i}
                                  for m, inp, s in run], schema=schema)
        tables.append(t.take(order_of(t, 1)))
    returned: list[int] = []

    def loader(table: pa.Table) -> pa.Table:
        assert all(m < table.column(ORDER_MS)[0].as_py() for m in returned)
        return table

    parts = [Part(t.column(ORDER_MS)[0].as_py(), lambda t=t: loader(t)) for t in tables]
    got = []
    for piece in merge(parts, 1, schema.names, lambda _: None):
        got += piece.to_pylist()
        returned += piece.column(ORDER_MS).to_pylist()
    expected = sorted((r for t in tables for r in t.to_pylist()),
                      key=lambda r: (r[ORDER_MS], r[INPUT_COL], r[SEQ_COL], r["__order_seq_0"]))
    assert got == expected


@pytest.mark.parametrize("budget", [BUDGET // 8, 4 * BUDGET])
def test_finish_as_one_table_is_the_oracle_with_small_and_large_budgets(tmp_path,
                                                                        budget: int) -> None:
    """Many slices and many merged batches (small budget) or few (large): the same output."""
    rows = big_join_rows(1500, 700)
    op, out = run_join(rows, str(tmp_path), budget)
    out.append(op.finish())
    assert pa.concat_tables(out).to_pylist() == reference_join(rows, ["k"], 2, None)
    assert os.listdir(tmp_path) == []


def test_a_tiny_budget_reads_a_group_back_a_bounded_number_of_times(tmp_path) -> None:
    """Budget 0 (every hash over it): at most MAX_SLICES slices per group, so each generation
    is read at most MAX_SLICES + 1 times (before: once per shared key hash)."""
    rows = big_join_rows(600, 150)
    op, out = run_join(rows, str(tmp_path), 0)
    generations = sum(len(g.generations) for g in op._groups)
    reads = []
    read = op._spill.read

    def counted(generation: object, schema: pa.Schema) -> pa.Table:
        reads.append(generation)
        return read(generation, schema)  # type: ignore[arg-type]

    op._spill.read = counted  # type: ignore[method-assign]
    out.append(op.finish())
    assert op.stats["cleanup_slices"] <= cleanup.MAX_SLICES * op.stats["cleanups"]
    assert 0 < len(reads) <= (cleanup.MAX_SLICES + 1) * generations
    assert pa.concat_tables(out).to_pylist() == reference_join(rows, ["k"], 2, None)


def test_a_dropped_or_restored_joins_spill_directory_is_removed(tmp_path) -> None:
    """Every micro-batch of a query restores the join from its snapshot (the generations are
    written again, into the restored join's own directory) and drops it after the next
    snapshot: before, each such join left its directory and files behind (under /tmp by
    default, about 1,500 of them after a day of test runs)."""
    rows = big_join_rows(2000, 500)
    op, _ = run_join(rows, str(tmp_path), BUDGET)
    assert any(g.generations for g in op._groups)
    (first,) = os.listdir(tmp_path)
    restored = Join.restore(op.snapshot())
    assert restored._spill.directory is None or len(os.listdir(tmp_path)) == 2
    restored.update(rows.slice(0, 0), None)
    del op  # the batch's join, dropped after its snapshot
    gc.collect()  # a join refers to itself (its buffer's accounting): the cyclic collector's
    assert first not in os.listdir(tmp_path)
    more = restored.snapshot()
    del restored
    gc.collect()
    assert os.listdir(tmp_path) == []
    again = Join.restore(more)
    out = again.finish()  # finish removes what it wrote
    assert out.num_rows > 0
    assert os.listdir(tmp_path) == []
