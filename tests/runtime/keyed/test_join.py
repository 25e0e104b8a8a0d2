"""``join(N, within=W)`` equals the batch oracle for any input, cut, bound, budget and restart.

The properties (Liu & Rundensteiner 2005, §4.2: "produce all missing results ... while prevent
duplicates"):

* the sequence of results equals :func:`reference_join` exactly, in order, whatever the budget
  -- from ``0`` bytes (every group is pushed after every update, so most results come from
  clean-up and wait in the reorder buffer) to ``None`` (nothing spills) -- the chunking, the
  ready bounds and a snapshot/restore point; the bound the join passes on never runs ahead of
  a result that has not left;
* with the same rows, cuts, bounds and budget, a run that is snapshotted and restored emits the
  identical sequence as one that is not (spilling decisions use event time and byte counts only).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, SpillError, StateError
from spark_stream_sched.runtime.durations import parse_bytes
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_match import match
from spark_stream_sched.runtime.keyed.join_state import (
    PartitionGroup,
    arrow_bytes,
    choose_pushes,
    push_order,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec, operator_names, parse_stage
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, TS_MAX
from spark_stream_sched.testing.join_reference import reference_join

PROFILE = settings(max_examples=120, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SCHEMA = pa.schema([("ts", pa.int64()), (INPUT_COL, pa.int32()), (SEQ_COL, pa.int64()),
                    ("k", pa.string()), ("g", pa.int64()), ("v", pa.float64()),
                    ("id", pa.int64())])
Plan = tuple[list[int], list[int | None], int]


@st.composite
def join_rows(draw: st.DrawFn, n_inputs: int, max_rows: int) -> pa.Table:
    """Rows of ``n_inputs`` inputs merged in the total order: ties, a hot key, null keys."""
    rows: list[dict[str, Any]] = []
    for index in range(n_inputs):
        t = draw(st.integers(-5, 5))
        most = max_rows // n_inputs
        for seq in range(draw(st.one_of(st.integers(0, most), st.integers(most // 2, most)))):
            t += draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 7, 20]))
            rows.append({"ts": t, INPUT_COL: index, SEQ_COL: seq,
                         "k": draw(st.sampled_from(["hot", "hot", "a", "a", "b", None])),
                         "g": draw(st.sampled_from([0, 0, 1, None])),
                         "v": draw(st.sampled_from([None, 0.5, -0.0, math.nan, 1e300])),
                         "id": len(rows)})
    rows.sort(key=lambda r: (r["ts"], r[INPUT_COL], r[SEQ_COL]))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@st.composite
def chunking(draw: st.DrawFn, table: pa.Table) -> Plan:
    """Cut points, one valid bound per chunk (later tuples have ``ts >= bound``), restore point."""
    n, ts = table.num_rows, table.column("ts").to_pylist()
    cuts = sorted(set(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=6)))) if n > 1 else []
    bounds: list[int | None] = []
    for cut in cuts:
        valid = st.one_of(st.just(ts[cut]), st.integers(ts[cut - 1] + 1, ts[cut]))
        bounds.append(draw(st.one_of(st.none(), valid)) if ts[cut - 1] < ts[cut] else None)
    bounds.append(draw(st.sampled_from([None, TS_MAX])))
    return cuts, bounds, draw(st.integers(0, len(cuts) + 1))


@pytest.fixture
def spill_root() -> Iterator[str]:
    """A directory for spill files, removed afterwards."""
    root = tempfile.mkdtemp(prefix="test-join-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def stage(n: int, within: int | None, budget: str | None = None) -> StageSpec:
    """``join(n[, within=<within> ms][, budget=...])`` as a parsed stage."""
    kwargs = (() if within is None else (("within", f"{within} ms"),)) + (
        () if budget is None else (("budget", budget),))
    return StageSpec("join", (str(n),), kwargs)


def run(make: Callable[[], Join], table: pa.Table, plan: Plan) -> tuple[pa.Table, int]:
    """Feed ``table`` cut by ``plan``, restoring from a snapshot before chunk ``plan[2]``
    (``len(cuts) + 1``: never); the results and the number of pushes (a restored counter)."""
    cuts, bounds, restore_at = plan
    op, outputs = make(), []
    edges = [0, *cuts, table.num_rows]
    for c, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
        if c == restore_at:
            restored = Join.restore(op.snapshot())
            assert restored.groups_stats() == op.groups_stats()  # P_s, P_o, T_u survive
            op = restored
        outputs.append(op.update(table.slice(start, end - start), bounds[c]))
    outputs.append(op.finish())
    for out in outputs:
        assert out.schema.equals(op.output_schema)
    return pa.concat_tables(outputs), op.counts.pushes


def exact(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as strings with floats in hex form (NaN and -0.0 compare bit for bit)."""
    return [repr({k: (v.hex() if isinstance(v, float) else v) for k, v in r.items()})
            for r in rows]


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.Table, list[str], int, int | None]:
    """Rows, key columns, N and window (fewer rows when every tuple shares one key)."""
    n = draw(st.integers(2, 4))
    keys = draw(st.sampled_from([["k"], ["k"], ["k", "g"], ["g"], []]))
    rows = draw(join_rows(n, 40 if keys else 16))
    return rows, keys, n, draw(st.sampled_from([None, 1, 3, 10, 10, 40, 40]))


@PROFILE
@given(cases(), st.sampled_from([None, 0, 1, 400, 3000, 10**9]), st.sampled_from([1, 3, 16]),
       st.data())
def test_join_equals_reference(case, budget, n_groups, data) -> None:
    rows, keys, n, within = case
    plan = data.draw(chunking(rows))
    with tempfile.TemporaryDirectory() as root:

        def make() -> Join:
            return Join(stage(n, within), SCHEMA, keys, "ts", memory_budget=budget,
                        spill_dir=root, n_groups=n_groups)

        expected = exact(reference_join(rows, keys, n, within))
        out, pushes = run(make, rows, plan)
        actual = exact(out.to_pylist())
        size = "0" if not actual else "1-9" if len(actual) < 10 else "10+"
        event(f"pushed: {pushes > 0}, results: {size}")
        assert actual == expected  # in order too: held results wait for the missing ones
        shutil.rmtree(root)
        again, _ = run(make, rows, (plan[0], plan[1], len(plan[0]) + 1))
        assert exact(again.to_pylist()) == actual  # a restart changes nothing, not the order
        assert not os.path.exists(root) or os.listdir(root) == []  # clean-up left no file


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(2, 3), st.sampled_from([1, 3, 10, None]), st.sampled_from([0, 0, 1, 600]),
       st.data())
def test_spilling_keeps_the_oracle_order(n, within, budget, data) -> None:
    # Budgets that push nearly every update, so clean-up finds missing results often; the
    # output must still be the oracle's sequence, and no stage after the join may see a bound
    # above a result that has not left yet.
    rows = data.draw(join_rows(n, 48))
    cuts, bounds, restore_at = data.draw(chunking(rows))
    assume(len(cuts) >= 2)
    expected = exact(reference_join(rows, ["k"], n, within))
    with tempfile.TemporaryDirectory() as root:
        op = Join(stage(n, within), SCHEMA, ["k"], "ts", memory_budget=budget, spill_dir=root,
                  n_groups=data.draw(st.sampled_from([1, 4])))
        outputs, edges, given_bound = [], [0, *cuts, rows.num_rows], None
        for c, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
            if c == restore_at:
                op = Join.restore(op.snapshot())
            outputs.append(op.update(rows.slice(start, end - start), bounds[c]))
            downstream = op.output_bound(bounds[c])
            if downstream is not None:  # every result with ts < the bound given on has left
                left = len(exact(pa.concat_tables(outputs).to_pylist()))
                due = sum(1 for r in reference_join(rows, ["k"], n, within)
                          if r["ts"] < downstream)
                assert left >= due
                assert given_bound is None or downstream >= given_bound  # never decreases
                given_bound = downstream
        outputs.append(op.finish())
    actual = exact(pa.concat_tables(outputs).to_pylist())
    event(f"clean-ups: {op.stats['cleanups'] > 0}, results: {len(actual) > 0}")
    assert actual == expected


def pairs(out: pa.Table) -> list[tuple[int, int]]:
    """``(ts_0, ts_1)`` of every result of a 2-way join, in output order."""
    return list(zip(out.column("ts_0").to_pylist(), out.column("ts_1").to_pylist(), strict=True))


def test_tiny_budget_pushes_and_clean_up_recovers_every_missing_result(spill_root) -> None:
    # input 0:  a@0          a@3
    # input 1:       a@1          a@4      within = 5 ms; budget 0: push after every update
    # results in the total order: (0,1)@1  (3,1)@3  (0,4)@4  (3,4)@4
    rows = table([(0, 0, "a"), (1, 1, "a"), (3, 0, "a"), (4, 1, "a")])
    op = Join(stage(2, 5), SCHEMA, ["k"], "ts", memory_budget=0, spill_dir=spill_root)
    first = op.update(rows.slice(0, 2), 3)  # a@0 and a@1 in one packet: joined right away
    assert pairs(first) == [(0, 1)]
    assert op.counts.pushes == 1
    assert op.hold_from == 3
    assert op.output_bound(3) == 3
    second = op.update(rows.slice(2, 2), 5)  # a@3, a@4 cannot see the pushed a@0, a@1
    assert pairs(second) == []  # (3,4)@4 waits: the missing (3,1)@3 and (0,4)@4 precede it
    assert op.output_bound(5) == 3  # a following stage may not close anything at ts >= 3
    assert sum(s["generations"] for s in op.groups_stats()) == 2
    cleaned = op.update(rows.slice(4, 0), 9)  # bound 9 >= max ts 4 + 5: the window closed
    assert pairs(cleaned) == [(3, 1), (0, 4), (3, 4)]  # merged with the held one, in order
    assert op.hold_from is None
    assert op.output_bound(9) == 9
    assert op.finish().num_rows == 0
    assert op.stats["cleanups"] >= 1
    assert os.listdir(spill_root) == []


def test_a_group_pushed_after_every_update_still_cleans_up_and_releases(spill_root) -> None:
    # One hot key, a tuple of each input every ms, updates of 2 ms, budget 0: the group is
    # pushed after every update, so it always has a generation younger than the window. Its
    # old generations are cleaned up as their window closes, so the held results leave and the
    # bound passed on keeps up with the ready bound (a result at t leaves by bound t + within).
    rows = table([(t, i, "hot") for t in range(100) for i in (0, 1)])
    op = Join(stage(2, 5), SCHEMA, ["k"], "ts", memory_budget=0, spill_dir=spill_root,
              n_groups=1)
    out = []
    for start in range(0, 200, 4):
        bound = rows.column("ts")[start + 3].as_py() + 1
        out.append(op.update(rows.slice(start, 4), bound))
        assert op.output_bound(bound) >= bound - 5 - 1, (bound, op.hold_from)
    released = sum(t.num_rows for t in out)
    out.append(op.finish())
    expected = exact(reference_join(rows, ["k"], 2, 5))
    assert exact(pa.concat_tables(out).to_pylist()) == expected
    assert released > 0.8 * len(expected)  # most results left before the end of input
    assert op.counts.pushes >= 40


def test_unordered_join_emits_clean_up_results_late(spill_root) -> None:
    # The same rows with ordered=False (Liu & Rundensteiner's (2005) behaviour, used by the
    # adaptation bench).
    rows = table([(0, 0, "a"), (1, 1, "a"), (3, 0, "a"), (4, 1, "a")])
    op = Join(stage(2, 5), SCHEMA, ["k"], "ts", memory_budget=0, spill_dir=spill_root,
              ordered=False)
    assert pairs(op.update(rows.slice(0, 2), 3)) == [(0, 1)]
    assert pairs(op.update(rows.slice(2, 2), 5)) == [(3, 4)]
    assert op.output_bound(5) == 5
    assert pairs(op.update(rows.slice(4, 0), 9)) == [(3, 1), (0, 4)]
    assert Join.restore(op.snapshot()).ordered is False
    assert op.finish().num_rows == 0
    assert os.listdir(spill_root) == []


def test_results_order_columns_and_window_edge() -> None:
    # input 0:  x@0 (v=1)          x@10 (v=3)
    # input 1:        x@5 (v=2)               within = 10 ms: 10 - 0 = 10 is NOT < 10
    rows = table([(0, 0, "x", 1.0), (5, 1, "x", 2.0), (10, 0, "x", 3.0)])
    out = Join(stage(2, 10), SCHEMA, ["k"], "ts").update(rows, None)
    assert out.column_names == ["ts", INPUT_COL, SEQ_COL, "k", "g_0", "v_0", "id_0", "ts_0",
                                "g_1", "v_1", "id_1", "ts_1"]
    assert [(r["ts"], r["v_0"], r["v_1"]) for r in out.to_pylist()] == [(5, 1.0, 2.0),
                                                                         (10, 3.0, 2.0)]


def test_results_of_several_groups_interleave_in_completing_order() -> None:
    keys = "abcdefgh"
    rows = table([(t, i, k) for t in range(3) for i in (0, 1) for k in keys])
    op = Join(stage(2, 10), SCHEMA, ["k"], "ts")
    out = op.update(rows, None)
    assert sum(1 for s in op.groups_stats() if s["rows"]) > 1  # the keys span several groups
    assert exact(out.to_pylist()) == exact(reference_join(rows, ["k"], 2, 10))


def test_purge_keeps_a_tuple_while_a_later_one_can_still_join() -> None:
    # input 0:  a@0                          within = 10 ms; bound 9 (horizon -1) keeps a@0,
    # input 1:            a@9                since 9 - 0 < 10; bound 10 would drop it
    rows = table([(0, 0, "a"), (9, 1, "a")])
    op = Join(stage(2, 10), SCHEMA, ["k"], "ts")
    assert op.update(rows.slice(0, 1), 9).num_rows == 0
    assert op.state_bytes > 0
    assert op.update(rows.slice(1, 1), 10).column("ts_0").to_pylist() == [0]
    assert sum(s["rows"] for s in op.groups_stats()) == 1  # a@0 purged at bound 10


def test_null_keys_never_match_and_unwindowed_keeps_everything() -> None:
    rows = table([(0, 0, None), (1, 1, None), (2, 0, "a"), (10**6, 1, "a")])
    op = Join(stage(2, None), SCHEMA, ["k"], "ts")
    out = op.update(rows, TS_MAX)
    assert out.column("ts_0").to_pylist() == [2]
    assert sum(s["rows"] for s in op.groups_stats()) == 2


def test_purge_and_statistics_use_event_time_and_arrow_bytes() -> None:
    rows = table([(0, 0, "a"), (1, 1, "a"), (2, 2, "a"), (50, 0, "b")])
    op = Join(stage(3, 10), SCHEMA, ["k"], "ts", n_groups=1)
    assert op.update(rows, 51).num_rows == 1
    (stats,) = op.groups_stats()
    assert stats["P_o"] == 1
    assert stats["T_u"] == 50
    assert stats["rows"] == 1
    assert stats["P_s"] == op.state_bytes > 0
    assert op.update(rows.slice(4, 0), 61).num_rows == 0
    assert op.state_bytes == 0


def test_timestamp_event_times_and_group_granularity() -> None:
    schema = pa.schema([("ts", pa.timestamp("ms")), (INPUT_COL, pa.int32()),
                        (SEQ_COL, pa.int64()), ("k", pa.int64())])
    rows = pa.table({"ts": pa.array([0, 1, 2, 2], pa.timestamp("ms")),
                     INPUT_COL: pa.array([0, 1, 0, 1], pa.int32()),
                     SEQ_COL: pa.array([0, 0, 1, 1], pa.int64()), "k": [7, 7, 7, 8]},
                    schema=schema)
    op = Join(StageSpec("join", (), (("within", "2 ms"),)), schema, ["k"], "ts", n_groups=4)
    out = op.update(rows, None)
    assert out.schema.field("ts_1").type == pa.timestamp("ms")
    assert out.num_rows == 2
    assert len(op.groups_stats()) == 4


def test_arrow_bytes_depends_only_on_the_values() -> None:
    fresh = pa.table({"x": pa.array([1, 2, 3], pa.int64()), "s": ["a", None, "bcd"],
                      "b": [True, False, True]})
    assert arrow_bytes(fresh) == 24 + (1 + 16 + 4) + 1  # values, bitmap + offsets + data, bits
    built = pa.concat_tables([fresh.slice(0, 1), fresh.slice(1, 2)]).combine_chunks()
    assert arrow_bytes(built) == arrow_bytes(fresh.slice(0, 3)) == arrow_bytes(fresh)
    assert arrow_bytes(fresh.slice(0, 1)) == 8 + (4 * 2 + 1) + 1  # no nulls: no bitmap


def test_push_order_idle_first_then_least_productive() -> None:
    def group(gid: int, rows: int, produced: int, last: int) -> PartitionGroup:
        memory = pa.table({"x": pa.array(range(rows), pa.int64())})
        return PartitionGroup(gid, memory, produced, last)
    groups = [group(0, 10, 5, 100), group(1, 10, 0, 100), group(2, 10, 50, 100),
              group(3, 10, 50, 10), group(4, 0, 0, 0), group(5, 10, 5, 100)]
    assert [g.gid for g in push_order(groups, 100, 50)] == [3, 1, 0, 5, 2]
    assert [g.gid for g in choose_pushes(groups, 10**6, 0.3, 100, 50)] == []
    assert [g.gid for g in choose_pushes(groups, 10**6 // 2, 0.3, 100, None)] == []
    total = sum(g.size for g in groups)
    assert [g.gid for g in choose_pushes(groups, total - 1, 0.3, 100, None)] == [1, 0]
    assert [g.gid for g in choose_pushes(groups, 0, 0.3, 100, None)] == [1, 0, 5, 2, 3]


def test_match_enumerates_boxes_in_partner_order() -> None:
    keys = np.array([1, 1, 1, 1, 2], np.uint64)
    inputs = np.array([0, 0, 1, 1, 0])
    found = match(keys, inputs, np.array([0, 0, 1, 1, 1]), np.array([2, 3]), 2, None)
    assert found.probe.tolist() == [2, 2, 3, 3]
    assert [p.tolist() for p in found.partners] == [[0, 1, 0, 1], [2, 2, 3, 3]]


def test_snapshot_folds_generations_in(spill_root) -> None:
    rows = table([(0, 0, "a"), (1, 1, "a"), (2, 0, "a"), (3, 1, "a")])
    op = Join(stage(2, None), SCHEMA, ["k"], "ts", memory_budget=0, spill_dir=spill_root)
    op.update(rows.slice(0, 1), 1)
    op.update(rows.slice(1, 1), 2)
    data = op.snapshot()
    shutil.rmtree(spill_root)  # the spill directory is lost with the process
    restored = Join.restore(data)
    out = pa.concat_tables([restored.update(rows.slice(2, 2), None), restored.finish()])
    assert sorted(exact(out.to_pylist())) == sorted(exact(reference_join(rows, ["k"], 2, None)))
    with pytest.raises(StateError, match="checksum"):
        Join.restore(data[:-1] + bytes([data[-1] ^ 1]))


def test_corrupt_generation_is_a_state_error_naming_it(spill_root) -> None:
    op = Join(stage(2, None), SCHEMA, ["k"], "ts", memory_budget=0, spill_dir=spill_root)
    op.update(table([(0, 0, "a")]), None)
    (directory,) = os.listdir(spill_root)
    (name,) = os.listdir(os.path.join(spill_root, directory))
    path = os.path.join(spill_root, directory, name)
    with open(path, "r+b") as fh:
        fh.seek(20)
        fh.write(b"\xff")
    with pytest.raises(StateError, match=name):
        op.finish()


def test_full_disk_is_a_spill_error_naming_the_path(small_disk: Path) -> None:
    rows = pa.table({"ts": pa.array(range(2000), pa.int64()),
                     INPUT_COL: pa.array([0] * 2000, pa.int32()),
                     SEQ_COL: pa.array(range(2000), pa.int64()),
                     "k": [f"key-{i % 7}" for i in range(2000)], "g": [0] * 2000,
                     "v": [0.5] * 2000, "id": range(2000)}, schema=SCHEMA)
    rows = rows.append_column("blob", pa.array(["x" * 400] * 2000))
    op = Join(stage(2, None), rows.schema, ["k"], "ts", memory_budget=0,
              spill_dir=str(small_disk))
    def feed() -> None:
        for start in range(0, 2000, 100):
            op.update(rows.slice(start, 100), None)

    with pytest.raises(SpillError, match=f"cannot write {small_disk}/join-spill-"):
        feed()
    assert not [p for p in small_disk.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize(("text", "message"), [
    ("join(1, within=10 seconds)", "integer 2..8"), ("join(9)", "integer 2..8"),
    ("join(x)", "integer 2..8"), ("join(2, 3)", "at most"), ("join(2, gap=1 second)", "at most"),
    ("join(3) as j", "no alias"), ("join(2, within=ten seconds)", "within"),
    ("join(2, within=10)", "no unit"),
])
def test_bad_arguments_name_the_stage(text, message) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Join(parse_stage(text), SCHEMA, ["k"], "ts")
    assert parse_stage(text).text() in str(info.value)


def test_bad_budget_missing_columns_clashes_and_extra_inputs_are_refused() -> None:
    with pytest.raises(ConfigError, match="budget 'lots'"):
        Join(StageSpec("join", ("2",), (("budget", "lots"),)), SCHEMA, ["k"], "ts")
    with pytest.raises(ConfigError, match="'nope' is missing"):
        Join(stage(2, 5), SCHEMA, ["nope"], "ts")
    clash = SCHEMA.append(pa.field("v_0", pa.int64()))
    with pytest.raises(ConfigError, match="twice"):
        Join(stage(2, 5), clash, ["v_0"], "ts")
    with pytest.raises(ConfigError, match="n_groups must be >= 1"):
        Join(stage(2, 5), SCHEMA, ["k"], "ts", n_groups=0)
    with pytest.raises(ConfigError, match=r"input 2 arrived.*join\(3"):
        Join(stage(2, 5), SCHEMA, ["k"], "ts").update(table([(0, 2, "a")]), None)


def test_budget_keyword_and_sizes() -> None:
    assert [parse_bytes(t) for t in ("0", "64k", "1.5 MiB", "2g", "10 b")] == [
        0, 65536, 1572864, 2 << 30, 10]
    op = Join(StageSpec("join", ("2",), (("budget", "64k"),)), SCHEMA, ["k"], "ts")
    assert op.memory_budget == 65536
    assert "join" in operator_names()


def table(rows: list[tuple[Any, ...]]) -> pa.Table:
    """Rows ``(ts, input, k[, v])`` in the total order, with per-input seq and ids."""
    seqs: dict[int, int] = {}
    out = []
    for i, (ts, index, key, *value) in enumerate(rows):
        out.append({"ts": ts, INPUT_COL: index, SEQ_COL: seqs.get(index, 0), "k": key,
                    "g": 0, "v": value[0] if value else None, "id": i})
        seqs[index] = seqs.get(index, 0) + 1
    return pa.Table.from_pylist(out, schema=SCHEMA)
