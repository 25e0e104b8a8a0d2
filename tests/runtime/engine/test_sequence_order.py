"""The order check along each input's sequence: one verdict per row, whatever the batching.

The pieces run as ``ordered()`` runs them: each micro-batch's rows of one input are marked
together (:func:`order_marks`, in ``pack``), scattered over partition groups, checked in each
group against what the group has seen (:func:`sequence_check`), and every group folds every
summary (:func:`seen_after`). The rows kept over all groups must be those of the reference: a
row is out of order iff its ts is below the largest ts of an earlier row of its input (batch
order, then sequence order), the sink's rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.engine.sequence_order import (
    NOTHING_SEEN,
    BatchOrder,
    order_marks,
    ready_bound_from_seen,
    seen_after,
    sequence_check,
    summaries_table,
    with_ends,
)
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX, INPUT_COL, TS_MAX

N_INPUTS = 3


def reference(batches: list[list[dict[str, Any]]]
              ) -> tuple[set[tuple[int, int]], str | None]:
    """(input, seq) of the rows in order (each input's rows in batch, then sequence, order),
    and what ``fail`` names: the first batch's lowest input's first row out of order."""
    kept, newest, failure = set(), [NOTHING_SEEN] * N_INPUTS, None
    for batch in batches:
        for row in sorted(batch, key=lambda r: (r[INPUT_COL], r["seq"])):
            j = row[INPUT_COL]
            if row["ts"] >= newest[j]:
                kept.add((j, row["seq"]))
            elif failure is None:
                failure = f"input {j} is out of order along 'seq': seq {row['seq']} has ts " \
                          f"{row['ts']} after ts {newest[j]} earlier in the input;"
            newest[j] = max(newest[j], row["ts"])
    return kept, failure


def reference_kept(batches: list[list[dict[str, Any]]]) -> set[tuple[int, int]]:
    return reference(batches)[0]


def run(batches: list[list[dict[str, Any]]], groups: list[list[int]], n_groups: int,
        policy: str) -> set[tuple[int, int]]:
    """The rows kept when each batch's rows go to the given groups (as ordered() runs)."""
    seen = [np.full(N_INPUTS, NOTHING_SEEN, np.int64) for _ in range(n_groups)]
    kept: set[tuple[int, int]] = set()
    for batch, group_of in zip(batches, groups, strict=True):
        if not batch:
            continue
        table = pa.Table.from_pylist(batch, schema=pa.schema(
            [("ts", pa.int64()), ("seq", pa.int64()), (INPUT_COL, pa.int32())]))
        summaries = []
        marked_parts = []
        for j in range(N_INPUTS):  # each input's rows of the batch in one partition
            mine = table.filter(pa.array([r[INPUT_COL] == j for r in batch]))
            if mine.num_rows:
                marked, summary = order_marks(mine, "ts", "seq")
                marked_parts.append((marked, [g for g, r in zip(group_of, batch, strict=True)
                                              if r[INPUT_COL] == j]))
                summaries += summary
        failures: list[str] = []
        for g in range(n_groups):  # every group gets every summary, rows or not
            rows = [m.filter(pa.array([x == g for x in owners])) for m, owners in marked_parts]
            try:
                out = sequence_check(pa.concat_tables(rows), seen[g],
                                     summaries_table(summaries), "ts", "seq", policy)
            except InputError as failure:
                failures.append(str(failure))
                continue
            kept |= set(zip(out.column(INPUT_COL).to_pylist(),
                            out.column("seq").to_pylist(), strict=True))
            seen[g] = seen_after(seen[g], summaries_table(summaries))
        if failures:
            # every group's task fails, each with the same message
            assert len(failures) == n_groups, failures
            assert len(set(failures)) == 1, failures
            raise InputError(failures[0])
    return kept


def stream(data: st.DataObject) -> tuple[list[list[dict[str, Any]]], list[list[int]], int]:
    """Random inputs (mostly in order, some rows going back), cut into random micro-batches."""
    rows, next_seq = [], [0] * N_INPUTS
    for _ in range(data.draw(st.integers(0, 60))):
        j = data.draw(st.integers(0, N_INPUTS - 1))
        ts = data.draw(st.integers(0, 40))
        rows.append({"ts": ts, "seq": next_seq[j], INPUT_COL: j})
        next_seq[j] += 1
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=5)))
    batches = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    batches = [data.draw(st.permutations(b)) if b else b for b in batches]  # no order inside
    n_groups = data.draw(st.integers(1, 4))
    groups = [[data.draw(st.integers(0, n_groups - 1)) for _ in b] for b in batches]
    return batches, groups, n_groups


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_drop_keeps_the_references_rows_for_any_batching_and_grouping(data: st.DataObject) -> None:
    batches, groups, n_groups = stream(data)
    assert run(batches, groups, n_groups, "drop") == reference_kept(batches)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fail_fails_exactly_when_the_reference_drops_a_row(data: st.DataObject) -> None:
    batches, groups, n_groups = stream(data)
    every = {(r[INPUT_COL], r["seq"]) for b in batches for r in b}
    kept, failure = reference(batches)
    if failure is None:
        assert kept == every
        assert run(batches, groups, n_groups, "fail") == every
    else:
        with pytest.raises(InputError) as raised:
            run(batches, groups, n_groups, "fail")
        assert str(raised.value).startswith(f"ordered(): {failure}"), (str(raised.value), failure)


def test_an_input_split_over_two_partitions_is_refused() -> None:
    table = pa.table({"input": pa.array([0, 0], pa.int32()), "newest": pa.array([5, 7])})
    with pytest.raises(Exception, match="several Spark partitions"):
        seen_after(np.full(N_INPUTS, NOTHING_SEEN, np.int64), table)


@settings(max_examples=100, deadline=None)
@given(newest=st.lists(st.none() | st.integers(-10**12, 10**13), min_size=1, max_size=4),
       ended=st.sets(st.integers(0, 3)))
def test_the_ready_bound_is_the_least_newest_time_once_every_input_has_sent(
        newest: list[int | None], ended: set[int]) -> None:
    """R = min over inputs of their largest event time; None while one has sent nothing;
    everything once every input has ended (an ended input's rows are all in)."""
    ended = {j for j in ended if j < len(newest)}
    summaries = [BatchOrder(j, t, repr(0), t) for j, t in enumerate(newest) if t is not None]
    seen = seen_after(np.full(len(newest), NOTHING_SEEN, np.int64),
                      summaries_table(with_ends(summaries, ended)))
    latest = [EVENT_TIME_MAX if j in ended else t for j, t in enumerate(newest)]
    if any(t is None for t in latest):
        assert ready_bound_from_seen(seen) is None
    elif all(j in ended for j in range(len(newest))):
        assert ready_bound_from_seen(seen) == TS_MAX
    else:
        assert ready_bound_from_seen(seen) == min(t for t in latest if t is not None)


def test_a_row_after_the_end_of_input_marker_is_refused_by_name() -> None:
    """Under ``fail``, a row an input sends after its marker names the input and the row."""
    seen = seen_after(np.full(2, NOTHING_SEEN, np.int64),
                      summaries_table(with_ends([BatchOrder(0, 5, "1", 5)], {0})))
    later = summaries_table([BatchOrder(0, 7, "2", 7)])
    with pytest.raises(InputError, match="input 0 sent a row after its end-of-input marker "
                                         r"\(seq 2, ts 7\)"):
        sequence_check(pa.table({"ts": [7], "seq": [2], INPUT_COL: pa.array([0], pa.int32()),
                                 "__before": [NOTHING_SEEN]}),
                       seen, later, "ts", "seq", "fail")


def test_a_row_after_the_end_of_input_marker_is_dropped_under_drop() -> None:
    """Under ``drop``, the ended input's later rows go; the other input's rows stay."""
    seen = seen_after(np.full(2, NOTHING_SEEN, np.int64),
                      summaries_table(with_ends([BatchOrder(0, 5, "1", 5)], {0})))
    later = summaries_table([BatchOrder(0, 7, "2", 7), BatchOrder(1, 8, "3", 8)])
    kept = sequence_check(pa.table({"ts": [7, 8], "seq": [2, 3],
                                    INPUT_COL: pa.array([0, 1], pa.int32()),
                                    "__before": [NOTHING_SEEN, NOTHING_SEEN]}),
                          seen, later, "ts", "seq", "drop")
    assert kept.column("seq").to_pylist() == [3]
