"""The engine's one micro-batch entry (``GroupedBatch``) over partition groups.

Inputs are cut into micro-batches at random points; each batch hands ``GroupedBatch.run`` the
new rows of every input, the ready bounds before and after the batch (the runtime's one
``ready_bound``) and an in-memory group store. Over all batches the result must equal the
reference oracle, for the direct path, every scheduling strategy and ``workers`` without a
scheduler, and the executor's worker pools must be reused, not rebuilt per batch.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.engine.batch import BatchResult, GroupedBatch, query_hold
from spark_stream_sched.runtime.engine.order import in_output_order
from spark_stream_sched.runtime.executor import pools
from spark_stream_sched.runtime.merge import ready_bound
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.runtime.query import QuerySpec
from spark_stream_sched.runtime.state.memory import MemoryStateStore
from spark_stream_sched.runtime.state.store import BatchStore, GroupState
from spark_stream_sched.testing.reference import reference_aggregate

from ..strategies import SCHEMA, input_stream

AGGREGATES = ("count(*) as n", "first(v) as fv", "last_where(s, v > 0.5) as lw",
              "sum(i) as si")


class MemoryStore:
    """A GroupStore keeping the last saved state of every group."""

    def __init__(self) -> None:
        self.states: dict[int, GroupState] = {}

    def load(self, group: int) -> GroupState:
        return self.states.get(group, GroupState())

    def save(self, states: dict[int, GroupState]) -> None:
        self.states.update(states)


def with_ids(table: pa.Table, input_id: int, seq0: int) -> pa.Table:
    table = table.append_column(INPUT_COL, pa.array(np.full(table.num_rows, input_id, np.int32)))
    return table.append_column(SEQ_COL, pa.array(np.arange(seq0, seq0 + table.num_rows)))


def run_batches(spec: QuerySpec, tables: list[pa.Table], cuts: list[list[int]],
                task_groups: list[tuple[int, ...]], **how: Any) -> list[dict[str, Any]]:
    """Run every batch over every task's groups as the source does; rows in output order.

    Each batch starts from the version the previous one committed (every task commits its
    groups into one version of a :class:`MemoryStateStore`), gets the query's hold bound from
    that version, and its tasks' results are put in the query's order across tasks, so the
    concatenated rows are the source's one sequence.
    """
    store = MemoryStateStore()
    done = [0] * len(tables)
    last: list[int | None] = [None] * len(tables)
    rows_out: list[dict[str, Any]] = []
    version: str | None = None
    n_batches = len(cuts[0])
    for b in range(n_batches + 1):
        final = b == n_batches
        ends = [t.num_rows if final else min(cuts[j][b], t.num_rows)
                for j, t in enumerate(tables)]
        ends = [max(e, d) for e, d in zip(ends, done, strict=True)]
        start_bound = ready_bound(last, [False] * len(tables))
        parts = [with_ids(t.slice(d, e - d), j, d)
                 for j, (t, d, e) in enumerate(zip(tables, done, ends, strict=True))]
        for j, (t, e) in enumerate(zip(tables, ends, strict=True)):
            if e:
                last[j] = int(t.column("ts")[e - 1].as_py())
        end_bound = TS_MAX if final else ready_bound(last, [False] * len(tables))
        rows = pa.concat_tables(parts)
        start = None if version is None else store.entries(version)
        hold = query_hold(start or {}, start_bound, False)
        version, outputs = f"v{b:04d}", []
        for t, groups in enumerate(task_groups):
            batch_store = BatchStore(store, start, version, f"t{t}")
            result = GroupedBatch(spec, SCHEMA, groups, **how).run(rows, batch_store,
                                                                   start_bound, end_bound, hold)
            assert isinstance(result, BatchResult)
            outputs += [o for o in result.per_group.values() if o.num_rows]
        if outputs:
            rows_out += in_output_order(spec, outputs).to_pylist()
        done = ends
    return rows_out


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["window_end"], row["window_start"], row["k"] is not None, row["k"] or "")


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[pa.Table], list[list[int]]]:
    tables = draw(st.lists(input_stream(), min_size=1, max_size=3))
    n_batches = draw(st.integers(0, 4))
    cuts = [sorted(draw(st.lists(st.integers(0, max(t.num_rows, 1)), min_size=n_batches,
                                 max_size=n_batches))) for t in tables]
    return tables, cuts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.sampled_from([1, 3]), st.sampled_from([
    {}, {"scheduler": "chain"}, {"scheduler": "path_capacity", "workers": 2},
    {"workers": 2}]))
def test_batches_over_groups_equal_the_oracle(case: Any, n_tasks: int, how: Any) -> None:
    tables, cuts = case
    spec = QuerySpec(len(tables), 3000, 1000, AGGREGATES, key_columns=("k",),
                     partition_groups=5)
    task_groups = [tuple(g for g in range(5) if g % n_tasks == t) for t in range(n_tasks)]
    got = sorted(run_batches(spec, tables, cuts, task_groups, **how), key=key)
    want = sorted(reference_aggregate(tables, spec.window, ["k"], list(AGGREGATES)), key=key)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for name in w:
            assert g[name] == pytest.approx(w[name]) if name == "si" else g[name] == w[name]


def test_where_filters_merged_rows_before_the_windows() -> None:
    table = pa.table({"ts": pa.array([0, 10, 20, 5000], pa.int64()),
                      "k": ["a", "a", "b", "a"], "g": pa.array([0] * 4, pa.int64()),
                      "v": [0.1, 0.9, 0.7, 0.2], "i": pa.array([1, 2, 3, 4], pa.int64()),
                      "s": ["x", "y", "z", "w"]}).cast(SCHEMA)
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n", "first(s) as f"), key_columns=("k",),
                     where="v > 0.5")
    result = GroupedBatch(spec, SCHEMA, tuple(range(16))).run(
        with_ids(table, 0, 0), MemoryStore(), None, TS_MAX)
    assert result.output.to_pylist() == [
        {"window_start": 0, "window_end": 1000, "k": "a", "n": 1, "f": "y"},
        {"window_start": 0, "window_end": 1000, "k": "b", "n": 1, "f": "z"}]


def test_uint64_keys_above_the_int64_range_get_their_own_windows_in_key_order() -> None:
    """Such a key failed in the key hash (Arrow's range error) before it reached a window."""
    big = 2**63
    table = pa.table({"ts": pa.array([1, 2, 3, 1500, 2500], pa.int64()),
                      "k": pa.array([big + 5, 7, big + 5, 2**64 - 1, 7], pa.uint64()),
                      "v": [1.0, 2.0, 3.0, 4.0, 5.0]})
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n", "first(v) as fv"), key_columns=("k",),
                     partition_groups=4)
    result = GroupedBatch(spec, table.schema, tuple(range(4))).run(
        with_ids(table, 0, 0), MemoryStore(), None, TS_MAX)
    assert result.output.to_pylist() == reference_aggregate(
        [table], spec.window, ["k"], ["count(*) as n", "first(v) as fv"]) == [
        {"window_start": 0, "window_end": 1000, "k": 7, "n": 1, "fv": 2.0},
        {"window_start": 0, "window_end": 1000, "k": big + 5, "n": 2, "fv": 1.0},
        {"window_start": 1000, "window_end": 2000, "k": 2**64 - 1, "n": 1, "fv": 4.0},
        {"window_start": 2000, "window_end": 3000, "k": 7, "n": 1, "fv": 5.0}]


def test_late_rows_of_an_idle_input_fail_or_are_dropped() -> None:
    table = pa.table({"ts": pa.array([100, 2000], pa.int64()), "k": ["a", "a"],
                      "g": pa.array([0, 0], pa.int64()), "v": [1.0, 1.0],
                      "i": pa.array([1, 1], pa.int64()), "s": ["x", "x"]}).cast(SCHEMA)
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n",))
    with pytest.raises(InputError, match="input 0 sent a late row at position 0: ts 100 is "
                                         "below the ready bound 1000"):
        GroupedBatch(spec, SCHEMA, (0,)).run(with_ids(table, 0, 0), MemoryStore(), 1000, 3000)
    dropping = QuerySpec(1, 1000, 1000, ("count(*) as n",), out_of_order="drop")
    result = GroupedBatch(dropping, SCHEMA, (0,)).run(with_ids(table, 0, 0), MemoryStore(),
                                                      1000, 3000)
    assert result.metrics["late_dropped"] == 1
    assert result.output.to_pylist() == [{"window_start": 2000, "window_end": 3000, "n": 1}]


def test_a_task_logs_the_late_rows_of_its_own_groups(caplog: pytest.LogCaptureFixture) -> None:
    # a source task of splitRows=tasks runs over the whole batch: it drops every late row but
    # counts only its groups' in the warning, so the tasks' warnings add up to the batch's
    keys = ["a", "b", "c", "d", "e", "f"]
    table = pa.table({"ts": pa.array([100] * 6 + [2000], pa.int64()), "k": keys + ["a"],
                      "g": pa.array([0] * 7, pa.int64()), "v": [1.0] * 7,
                      "i": pa.array([1] * 7, pa.int64()), "s": ["x"] * 7}).cast(SCHEMA)
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n",), key_columns=("k",),
                     out_of_order="drop", partition_groups=4)
    group_of = group_of_rows(table.slice(0, 6), ["k"], 4)
    mine = int(group_of[0])
    logged = []
    for groups in [(mine,), tuple(g for g in range(4) if g != mine)]:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            result = GroupedBatch(spec, SCHEMA, groups).run(with_ids(table, 0, 0),
                                                            MemoryStore(), 1000, 3000)
        assert result.metrics["late_dropped"] == 6  # the batch's figure, in every task
        logged += [r.getMessage() for r in caplog.records]
    others = 6 - int((group_of == mine).sum())
    assert 0 < others < 6  # the keys fall into both tasks' groups
    assert logged == [f"dropped {6 - others} late rows (outOfOrder=drop)",
                      f"dropped {others} late rows (outOfOrder=drop)"]


def test_workers_without_scheduler_run_on_the_executor_under_fifo() -> None:
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n",))
    assert GroupedBatch(spec, SCHEMA, (0,)).strategy is None
    assert GroupedBatch(spec, SCHEMA, (0,), workers=1).strategy is None
    assert GroupedBatch(spec, SCHEMA, (0,), workers=3).strategy == "fifo"
    assert GroupedBatch(spec, SCHEMA, (0,), "chain", 3).strategy == "chain"


def test_executor_pools_are_reused_across_batches() -> None:
    table = pa.table({"ts": pa.array(range(0, 50_000, 10), pa.int64()),
                      "k": ["a", "b"] * 2500, "g": pa.array([0] * 5000, pa.int64()),
                      "v": [1.0] * 5000, "i": pa.array([1] * 5000, pa.int64()),
                      "s": ["x"] * 5000}).cast(SCHEMA)
    spec = QuerySpec(1, 1000, 1000, ("count(*) as n",), key_columns=("k",), partition_groups=4)
    pools.shutdown_pools()
    store = MemoryStore()
    batch = GroupedBatch(spec, SCHEMA, (0, 1, 2, 3), "fifo", 2)
    for b in range(3):
        part = table.slice(b * 1000, 1000)
        batch.run(with_ids(part, 0, b * 1000), store, None if b == 0 else b * 10_000 - 10,
                  (b + 1) * 10_000 - 10)
        assert pools.idle_pools() == 1  # one pool of 2 threads, lent and returned each batch
