"""Engine contracts: queues and reorder buffers, errors, unsupported plans."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.executor import Engine, Packet, PacketQueue, WorkerPool
from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan, QueueId


def _packet(seq: int, rows: int) -> Packet:
    return Packet(seq, pa.table({"x": np.arange(rows, dtype=np.int64)}), arrival=float(seq))


def test_ordered_queue_exposes_only_the_contiguous_prefix() -> None:
    q = PacketQueue(QueueId("a", "b"), ordered=True)
    assert q.push(_packet(2, 3)) is False
    assert q.push(_packet(1, 0)) is False
    assert (q.rows, q.nbytes, q.ready_work) == (3, 24, 0)
    assert q.take() is None
    assert q.push(_packet(0, 5)) is True
    assert q.ready_work == 5 + 1 + 3  # the empty packet counts as one unit of work
    assert [q.take().seq for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    assert (q.rows, q.nbytes, q.ready_work) == (0, 0, 0)
    q.close(3)
    assert q.drained
    with pytest.raises(StateError, match="pushed twice"):
        q.push(_packet(1, 1))


def test_unordered_queue_hands_out_in_arrival_order() -> None:
    q = PacketQueue(QueueId("a", "b"), ordered=False)
    for seq in (3, 1, 2):
        assert q.push(_packet(seq, 2))
    assert q.oldest == 3.0
    assert q.head_work == 2
    assert [q.take().seq for _ in range(3)] == [3, 1, 2]  # type: ignore[union-attr]


def test_joins_are_rejected_with_a_clear_error() -> None:
    plan = QueryPlan([OperatorDef("j", OperatorKind.JOIN, ("a", "b"))])
    with pytest.raises(ConfigError, match="single-input"):
        Engine(plan)


def test_unknown_map_function_and_missing_input() -> None:
    plan = QueryPlan([OperatorDef("m", OperatorKind.MAP, ("s",),
                                  params={"column": "y", "function": "exec", "args": ["x"]})])
    with pytest.raises(ConfigError, match="not allowed"):
        Engine(plan).run({"s": pa.table({"x": [1]})})
    with pytest.raises(ConfigError, match="no input given"):
        Engine(plan).run({})


def test_an_operator_error_reaches_the_caller(pools: dict[int, WorkerPool]) -> None:
    def bad(table: pa.Table) -> pa.Table:
        if table.num_rows and table.column("x")[0].as_py() >= 50:
            raise ValueError("bad row")
        return table

    plan = QueryPlan([OperatorDef("m", OperatorKind.MAP, ("s",), params={"fn": bad})])
    data = pa.table({"x": np.arange(100, dtype=np.int64)})
    with pytest.raises(ValueError, match="bad row"):
        Engine(plan, "chain", pool=pools[2], packet_rows=10).run({"s": data}, timeout=60)


def test_user_function_map_and_empty_input(pools: dict[int, WorkerPool]) -> None:
    plan = QueryPlan([OperatorDef("m", OperatorKind.MAP, ("s",),
                                  params={"fn": lambda t: t.append_column("z", t.column("x"))})])
    empty = pa.table({"x": pa.array([], pa.int64())})
    out = Engine(plan, pool=pools[1]).run({"s": empty}).outputs["m"]
    assert out.num_rows == 0
    assert out.column_names == ["x", "z"]


def test_a_stream_without_packets_is_rejected() -> None:
    plan = QueryPlan([OperatorDef("f", OperatorKind.FILTER, ("s",), params={"predicate": "x > 0"})])
    with pytest.raises(ConfigError, match="no packets"):
        Engine(plan).run({"s": []})
