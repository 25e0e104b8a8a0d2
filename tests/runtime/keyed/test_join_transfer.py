"""Moving partition groups between two ``Join`` instances mid-stream loses and duplicates nothing.

Two instances of one query play two Spark tasks; a router sends each row to the instance that
holds its partition group (:meth:`Join.group_of`). Between updates, random groups move to the
other instance (:meth:`Join.take_group` / :meth:`Join.give_group`, spilled generations
included) and random groups are pushed on order (:meth:`Join.push_group`). The union of both
instances' results must equal the batch oracle as a multiset, whatever the moves, cuts,
bounds and budgets.
"""

from __future__ import annotations

import tempfile

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.join_transfer import decode_group, encode_group
from spark_stream_sched.runtime.packets import INPUT_COL
from spark_stream_sched.testing.join_reference import reference_join
from tests.runtime.keyed.test_join import (
    PROFILE,
    SCHEMA,
    chunking,
    exact,
    join_rows,
    stage,
    table,
)

GROUPS = 4


def route(op: Join, rows: pa.Table, owner: list[int]) -> list[pa.Table]:
    """Rows of each of the two instances (null keys go to instance 0; they never join)."""
    groups = op.group_of(rows)
    task = np.where(groups < 0, 0, np.asarray(owner)[np.maximum(groups, 0)])
    return [rows.filter(pa.array(task == t)) for t in (0, 1)]


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    """True if ``part`` appears in ``whole`` in the same order (gaps allowed)."""
    rest = iter(whole)
    return all(row in rest for row in part)


@PROFILE
@given(st.integers(2, 3), st.sampled_from([None, 3, 40]), st.sampled_from([None, 0, 500]),
       st.booleans(), st.data())
def test_moving_groups_mid_stream_equals_the_oracle(n, within, budget, ordered, data) -> None:
    # Unordered joins (Liu & Rundensteiner 2005) move any group; ordered ones only groups with
    # nothing on disk (as lazy-disk does), and then each instance's output keeps the oracle's order.
    rows = data.draw(join_rows(n, 36))
    cuts, bounds, _ = data.draw(chunking(rows))
    owner = data.draw(st.lists(st.integers(0, 1), min_size=GROUPS, max_size=GROUPS))
    with tempfile.TemporaryDirectory() as root:
        ops = [Join(stage(n, within), SCHEMA, ["k"], "ts", memory_budget=budget,
                    spill_dir=root, n_groups=GROUPS, ordered=ordered) for _ in (0, 1)]
        outputs: list[list[pa.Table]] = [[], []]
        edges = [0, *cuts, rows.num_rows]
        for c, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
            for gid in data.draw(st.lists(st.integers(0, GROUPS - 1), max_size=3)):
                if ordered and ops[owner[gid]].groups_stats()[gid]["generations"]:
                    continue
                ops[1 - owner[gid]].give_group(ops[owner[gid]].take_group(gid))
                owner[gid] = 1 - owner[gid]
            for gid in data.draw(st.lists(st.integers(0, GROUPS - 1), max_size=2)):
                ops[owner[gid]].push_group(gid)
            parts = route(ops[0], rows.slice(start, end - start), owner)
            for t, (op, part) in enumerate(zip(ops, parts, strict=True)):
                outputs[t].append(op.update(part, bounds[c]))
        for t, op in enumerate(ops):
            outputs[t].append(op.finish())
        streams = [exact(pa.concat_tables(o).to_pylist()) for o in outputs]
    expected = exact(reference_join(rows, ["k"], n, within))
    assert sorted(streams[0] + streams[1]) == sorted(expected)
    if ordered:
        assert all(is_subsequence(s, expected) for s in streams)


def test_an_ordered_join_refuses_a_spilled_group(tmp_path) -> None:
    rows = table([(0, 0, "a"), (1, 1, "a")])
    sender, receiver = (Join(stage(2, None), SCHEMA, ["k"], "ts", spill_dir=str(tmp_path / d),
                             n_groups=GROUPS) for d in "sr")
    gid = int(sender.group_of(rows)[0])
    sender.update(rows, None)
    sender.push_group(gid)
    with pytest.raises(ConfigError, match=f"partition group {gid} has generations on disk"):
        receiver.give_group(sender.take_group(gid))


def test_a_moved_group_keeps_its_spilled_generations_and_statistics(tmp_path) -> None:
    # input 0:  a@0        a@2       unwindowed; a's group is pushed on sender, then moved:
    # input 1:       a@1        a@3  the receiver's clean-up finds (a@0, a@3) and (a@2, a@1)
    rows = table([(0, 0, "a"), (1, 1, "a"), (2, 0, "a"), (3, 1, "a")])
    sender, receiver = (Join(stage(2, None), SCHEMA, ["k"], "ts", spill_dir=str(tmp_path / d),
                             n_groups=GROUPS, ordered=False) for d in "sr")
    gid = int(sender.group_of(rows)[0])
    first = sender.update(rows.slice(0, 2), None)
    assert first.num_rows == 1
    assert sender.push_group(gid) > 0
    state = sender.take_group(gid)
    assert [t.num_rows for t, _ in state.generations] == [2]
    assert state.produced == 1
    assert sender.groups_stats()[gid] == {"group": gid, "P_s": 0, "P_o": 0, "T_u": None,
                                          "rows": 0, "generations": 0, "spilled_rows": 0}
    receiver.give_group(decode_group(encode_group(state)))  # through bytes, as between hosts
    assert receiver.groups_stats()[gid]["generations"] == 1
    second = receiver.update(rows.slice(2, 2), None)
    cleaned = receiver.finish()
    got = sorted((r["ts_0"], r["ts_1"]) for r in
                 pa.concat_tables([first, second, cleaned]).to_pylist())
    assert got == [(0, 1), (0, 3), (2, 1), (2, 3)]
    assert receiver.groups_stats()[gid]["P_o"] == 4
    assert sender.finish().num_rows == 0


def test_group_of_marks_null_keys_and_agrees_between_instances() -> None:
    rows = table([(0, 0, "a"), (0, 1, None), (1, 0, "b")])
    one, two = (Join(stage(2, 5), SCHEMA, ["k"], "ts", n_groups=7) for _ in (0, 1))
    groups = one.group_of(rows)
    assert groups[1] == -1
    assert 0 <= groups[0] < 7
    assert list(groups) == list(two.group_of(rows))


def test_giving_to_an_occupied_group_or_an_unknown_id_is_refused() -> None:
    rows = table([(0, 0, "a"), (1, 1, "a")])
    one, two = (Join(stage(2, 5), SCHEMA, ["k"], "ts", n_groups=GROUPS) for _ in (0, 1))
    one.update(rows, None)
    two.update(rows, None)
    gid = int(one.group_of(rows)[0])
    with pytest.raises(StateError, match=f"partition group {gid} already holds state"):
        two.give_group(one.take_group(gid))
    with pytest.raises(ConfigError, match="partition group 9 does not exist; groups are 0..3"):
        one.take_group(9)
    other = Join(stage(2, 5), SCHEMA.append(pa.field("w", pa.int64())), ["k"], "ts",
                 n_groups=GROUPS)
    two_state = two.take_group(gid)
    with pytest.raises(StateError, match="another schema"):
        other.give_group(two_state)
    assert INPUT_COL in two_state.memory.column_names
