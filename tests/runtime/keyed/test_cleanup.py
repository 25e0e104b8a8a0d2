"""The clean-up stage (Eq. 1) as a unit: with the normal run, exactly the batch join, once each.

A partition group's tuples arrive in the total order; at random points its memory part is
pushed as a generation, and at random points the leading generations that no later tuple can
join (``max ts + W <=`` the next tuple's ts; unwindowed: none before the end) are cleaned up and
deleted; at the end everything is. The normal run produced the results within each epoch
(``V_t``, here the batch oracle over each epoch alone); every clean-up adds
:func:`missing_results`. Together they must be the batch oracle's results over all tuples as a
multiset: no result lost, none twice.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.keyed.cleanup import missing_results
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_match import MS, JoinShape
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.join_reference import reference_join

from .test_join import SCHEMA, join_rows

PROFILE = settings(max_examples=200, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
Ids = tuple[int, ...]


def stored(rows: pa.Table, keys: list[str]) -> pa.Table:
    """The tuples a join stores: non-null keys, with the event time in ms."""
    valid = np.ones(rows.num_rows, bool)
    for name in keys:
        valid &= np.asarray(rows.column(name).is_valid().to_numpy(zero_copy_only=False))
    kept = rows.filter(pa.array(valid))
    return kept.append_column(MS, kept.column("ts"))


def oracle(rows: pa.Table, keys: list[str], n: int, within: int | None) -> list[Ids]:
    """Partner ids of every batch-join result of ``rows``."""
    table = rows.drop_columns([MS]) if MS in rows.column_names else rows
    return [tuple(r[f"id_{j}"] for j in range(n)) for r in reference_join(table, keys, n, within)]


def found_ids(universe: pa.Table, partners: list[np.ndarray]) -> list[Ids]:
    """Partner ids of results given as universe positions."""
    ids = np.asarray(universe.column("id").to_numpy())
    return [tuple(int(ids[p[i]]) for p in partners) for i in range(len(partners[0]))]


@st.composite
def runs(draw: st.DrawFn) -> tuple[pa.Table, list[str], int, int | None, list[tuple[int, bool,
                                                                                      int]]]:
    """Rows, keys, N, window and per cut ``(row, push?, generations to close)``."""
    n = draw(st.integers(2, 3))
    keys = draw(st.sampled_from([["k"], ["k", "g"], ["g"], []]))
    rows = stored(draw(join_rows(n, 36 if keys else 15)), keys)
    within = draw(st.sampled_from([None, 1, 3, 10, 40]))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(rows.num_rows, 1)), max_size=8))))
    plan = [(cut, draw(st.booleans()), draw(st.integers(0, 4))) for cut in cuts]
    return rows, keys, n, within, plan


@PROFILE
@given(runs())
def test_normal_run_and_clean_ups_give_the_batch_join_once(case: Any) -> None:
    rows, keys, n, within, plan = case
    shape = JoinShape(keys, n, within)
    ts = rows.column("ts").to_pylist()
    epochs_ever: list[pa.Table] = []  # every epoch, for the normal run's results
    generations: list[pa.Table] = []
    produced: list[Ids] = []
    at = 0  # rows[:at] were pushed; after the cut, rows[at:cut] are the memory part
    for cut, push, close in plan:
        if push and cut > at:
            generations.append(rows.slice(at, cut - at))
            epochs_ever.append(generations[-1])
            at = cut
        nxt = ts[cut] if cut < len(ts) else None  # every later tuple has ts >= nxt
        closable = 0
        while (closable < len(generations) and within is not None and nxt is not None
               and max(generations[closable].column("ts").to_pylist()) + within <= nxt):
            closable += 1
        closed = min(close, closable)
        if closed:
            universe, found = missing_results([*generations, rows.slice(at, cut - at)],
                                              closed, shape)
            produced += found_ids(universe, found.partners)
            generations = generations[closed:]
    memory = rows.slice(at)
    epochs_ever.append(memory)
    universe, found = missing_results([*generations, memory], len(generations), shape)
    produced += found_ids(universe, found.partners)
    for epoch in epochs_ever:  # the normal run: the results within one epoch
        produced += oracle(epoch, keys, n, within)
    expected = oracle(rows, keys, n, within)
    assert len(set(expected)) == len(expected)
    assert Counter(produced) == Counter(expected)


def test_eq1_two_pushes_of_a_three_way_group() -> None:
    """A, B, C pushed once (P_1), then A, B, C again in memory: 8 results, 2 within an epoch."""
    rows = stored(pa.Table.from_pylist(
        [{"ts": t, INPUT_COL: t % 3, SEQ_COL: t // 3, "k": "x", "g": 0, "v": 0.0, "id": t}
         for t in range(6)], schema=SCHEMA), ["k"])
    universe, found = missing_results([rows.slice(0, 3), rows.slice(3)], 1,
                                      JoinShape(["k"], 3, None))
    got = found_ids(universe, found.partners)
    assert sorted(got) == sorted({(a, b, c) for a in (0, 3) for b in (1, 4) for c in (2, 5)}
                                 - {(0, 1, 2), (3, 4, 5)})
    # ordered by the completing tuple's position, then the partners' (input 0 first)
    assert [max(r) for r in got] == sorted(max(r) for r in got)


def test_only_results_with_their_earliest_tuple_in_a_closed_generation() -> None:
    rows = stored(pa.Table.from_pylist(
        [{"ts": t, INPUT_COL: t % 2, SEQ_COL: t // 2, "k": "x", "g": 0, "v": 0.0, "id": t}
         for t in range(6)], schema=SCHEMA), ["k"])
    epochs = [rows.slice(0, 2), rows.slice(2, 2), rows.slice(4)]
    universe, found = missing_results(epochs, 1, JoinShape(["k"], 2, None))
    got = found_ids(universe, found.partners)
    assert all(min(r) < 2 and max(r) >= 2 for r in got)  # earliest in epoch 0, not within it
    assert sorted(got) == [(0, 3), (0, 5), (2, 1), (4, 1)]


def test_finish_cleans_up_one_group_at_a_time_and_reports_its_figures(tmp_path) -> None:
    """Unwindowed, budget 0: every update pushes every group; finish() reads a group's
    generations back only after the previous group's files are deleted and its results held
    (written to disk, over the budget), and the output is still the oracle's, in order."""
    rows = pa.Table.from_pylist(
        [{"ts": t, INPUT_COL: i, SEQ_COL: t, "k": f"k{t % 7}", "g": 0, "v": 0.0,
          "id": 2 * t + i} for t in range(40) for i in (0, 1)], schema=SCHEMA)
    op = Join(StageSpec("join", ("2",)), SCHEMA, ["k"], "ts", memory_budget=0,
              spill_dir=str(tmp_path), n_groups=4)
    out = [op.update(rows.slice(start, 10), int(rows.column("ts")[start + 9].as_py()) + 1)
           for start in range(0, rows.num_rows, 10)]
    on_disk = sum(x.size for g in op._groups for x in g.generations)
    before = dict(op.stats)
    assert before["pushes"] == sum(len(g.generations) for g in op._groups) > 4
    assert before["pushed_bytes"] == on_disk  # unwindowed: every pushed tuple is still there
    events: list[tuple[str, int]] = []
    read, delete = op._spill.read, op._spill.delete

    def reading(generation: Any, schema: pa.Schema) -> pa.Table:
        events.append(("read", int(os.path.basename(generation.path)[6:10])))
        return read(generation, schema)

    def deleting(generation: Any) -> None:
        path = generation if isinstance(generation, str) else generation.path
        name = os.path.basename(path)
        events.append(("delete", int(name[6:10]) if name.startswith("group-") else -1))
        delete(generation)

    op._spill.read, op._spill.delete = reading, deleting  # type: ignore[method-assign]
    out.append(op.finish())
    groups = [gid for kind, gid in events if kind == "read"]
    assert groups == sorted(groups)  # group after group
    for gid in set(groups):  # every file of a group is deleted before the next group is read
        last_delete = max(i for i, e in enumerate(events) if e == ("delete", gid))
        later_reads = [i for i, e in enumerate(events) if e[0] == "read" and e[1] > gid]
        assert not later_reads or last_delete < min(later_reads)
    assert op.stats["held_pushed_bytes"] > before["held_pushed_bytes"]  # held, over budget
    assert op.stats["cleanups"] == before["cleanups"] + len(set(groups))
    assert op.stats["cleanup_seconds"] > 0
    expected = reference_join(rows, ["k"], 2, None)
    assert pa.concat_tables(out).to_pylist() == expected
    assert op.stats["cleanup_results"] > len(expected) // 2  # most came from the clean-up
    assert os.listdir(tmp_path) == []
