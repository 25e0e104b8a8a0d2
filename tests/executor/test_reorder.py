"""ReorderBuffer (Prasaad et al. 2018, fig. 4): any arrival order in, sequence order out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.executor.reorder import ReorderBuffer


@dataclass(frozen=True)
class Item:
    seq: int


@given(st.integers(0, 60).flatmap(lambda n: st.permutations(list(range(n)))))
def test_any_arrival_order_comes_out_in_sequence(order: list[int]) -> None:
    buffer: ReorderBuffer[Item] = ReorderBuffer("test")
    out: list[int] = []
    for k, seq in enumerate(order, start=1):
        released = [item.seq for item in buffer.offer(Item(seq))]
        out.extend(released)
        arrived = set(order[:k])
        prefix = next(i for i in range(len(order) + 1) if i not in arrived)
        assert out == list(range(prefix))  # exactly the contiguous prefix, at once
        assert len(buffer) == k - prefix
    assert out == sorted(order)


def test_a_sequence_number_twice_is_an_error() -> None:
    buffer: ReorderBuffer[Item] = ReorderBuffer("queue a->b")
    buffer.offer(Item(1))
    with pytest.raises(StateError, match="queue a->b: packet 1 was pushed twice"):
        buffer.offer(Item(1))
    buffer.offer(Item(0))
    with pytest.raises(StateError, match="packet 0 was pushed twice"):
        buffer.offer(Item(0))
