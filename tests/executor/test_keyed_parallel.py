"""Keyed pipelines on W threads equal a sequential run.

See Prasaad et al. (2018), Theorem 5.2, §4, §6.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.keyed_parallel import (
    HEURISTICS,
    QUEUES,
    Keyed,
    KeyedPipeline,
    Stateless,
)
from spark_stream_sched.runtime.keyed.base import KeyedOperator, build_operator, operator_class
from spark_stream_sched.runtime.keyed.stage import StageSpec, operator_names, parse_stage


class RunningSum(KeyedOperator):
    """Row operator: running count and sum of ``v`` per key (a per-tuple loop: test only)."""

    name = "test_running_sum"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.state: dict[int, tuple[int, int]] = {}

    @property
    def output_schema(self) -> pa.Schema:
        return self.input_schema.append(pa.field("n", pa.int64())).append(
            pa.field("total", pa.int64()))

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        ns, totals = [], []
        for k, v in zip(rows.column("k").to_pylist(), rows.column("v").to_pylist(), strict=True):
            n, total = self.state.get(k, (0, 0))
            self.state[k] = (n + 1, total + v)
            ns.append(n + 1)
            totals.append(total + v)
        return rows.append_column("n", pa.array(ns, pa.int64())).append_column(
            "total", pa.array(totals, pa.int64()))

    def snapshot(self) -> bytes:
        return json.dumps(sorted(self.state.items())).encode()

    @classmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        raise NotImplementedError


class CountAtEnd(RunningSum):
    """Closing operator: one row ``(k, n)`` per key at :meth:`finish`."""

    emits_rows = False

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([("k", pa.int64()), ("n", pa.int64())])

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        super().update(rows, bound)
        return self.output_schema.empty_table()

    def finish(self) -> pa.Table:
        keys = sorted(self.state)
        return pa.table({"k": pa.array(keys, pa.int64()),
                         "n": pa.array([self.state[k][0] for k in keys], pa.int64())},
                        schema=self.output_schema)


SCHEMA = pa.schema([("ts", pa.int64()), ("k", pa.int64()), ("v", pa.int64()),
                    ("__input", pa.int32()), ("__seq", pa.int64())])


def make(cls: type[KeyedOperator], schema: pa.Schema = SCHEMA) -> KeyedOperator:
    return cls(StageSpec(cls.name), schema, ["k"], "ts")


def make_registered(text: str) -> KeyedOperator:
    stage = parse_stage(text)
    return operator_class(stage.name)(stage, SCHEMA, ["k"], "ts")


def packets_of(keys: list[int], cuts: list[int]) -> list[tuple[pa.Table, int | None]]:
    n = len(keys)
    table = pa.table({"ts": np.arange(n, dtype=np.int64), "k": np.array(keys, np.int64),
                      "v": (np.arange(n, dtype=np.int64) * 7) % 11,
                      "__input": np.zeros(n, np.int32), "__seq": np.arange(n, dtype=np.int64)},
                     schema=SCHEMA)
    edges = sorted({0, n, *(c % (n + 1) for c in cuts)})
    return [(table.slice(a, b - a), b) for a, b in zip(edges, edges[1:], strict=False)]


def sequential(op: KeyedOperator, packets: list[tuple[pa.Table, int | None]]) -> pa.Table:
    """The oracle: one operator instance, every packet in order, then finish."""
    outs = [op.update(t, b) for t, b in packets] + [op.finish()]
    return pa.concat_tables(outs)


def keep_odd_v(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(pc.bit_wise_and(table.column("v"), 1), 1))


skewed_keys = st.lists(st.one_of(st.integers(0, 3), st.integers(0, 200)), max_size=300)


@settings(max_examples=40, deadline=None)
@given(keys=skewed_keys, cuts=st.lists(st.integers(0, 300), max_size=8),
       workers=st.integers(1, 4), queue=st.sampled_from(QUEUES),
       heuristic=st.sampled_from(HEURISTICS), partitions=st.sampled_from([1, 3, 100]))
def test_pipeline_equals_sequential(keys: list[int], cuts: list[int], workers: int, queue: str,
                                    heuristic: str, partitions: int) -> None:
    packets = packets_of(keys, cuts)
    stages = [Stateless("odd", keep_odd_v),
              Keyed("sum", lambda p: make(RunningSum), ("k",), partitions),
              Stateless("big", lambda t: t.filter(pc.greater(t.column("n"), 1)))]
    run = KeyedPipeline(stages, workers=workers, queue=queue, heuristic=heuristic,
                        quantum=0.0005).run(packets)
    expected = sequential(make(RunningSum), [(keep_odd_v(t), b) for t, b in packets])
    expected = expected.filter(pc.greater(expected.column("n"), 1))
    got = run.table()
    assert got is not None
    assert got.equals(expected)
    assert len(run.outputs) == len(packets) + 1  # one output per packet, plus finish


@settings(max_examples=20, deadline=None)
@given(keys=skewed_keys, cuts=st.lists(st.integers(0, 300), max_size=5),
       workers=st.integers(1, 4), queue=st.sampled_from(QUEUES))
def test_closing_operator_equals_sequential(keys: list[int], cuts: list[int], workers: int,
                                           queue: str) -> None:
    packets = packets_of(keys, cuts)
    pipe = KeyedPipeline([Keyed("count", lambda p: make(CountAtEnd), ("k",), 7)],
                         workers=workers, queue=queue)
    got = pipe.run(packets).table()
    assert got is not None
    assert got.equals(sequential(make(CountAtEnd), packets))


def make_sessionize(gap: str) -> KeyedOperator:
    return build_operator(parse_stage(f"sessionize({gap})"), SCHEMA, ["k"], "ts",
                          ("count(*) as n", "sum(v) as total", "first(v) as v0"))


@settings(max_examples=40, deadline=None)
@given(keys=skewed_keys, cuts=st.lists(st.integers(0, 300), max_size=8),
       workers=st.integers(1, 4), queue=st.sampled_from(QUEUES),
       heuristic=st.sampled_from(HEURISTICS), partitions=st.sampled_from([1, 3, 100]),
       gap_ms=st.sampled_from([1, 3, 20]))
def test_sessionize_equals_sequential_exactly(keys: list[int], cuts: list[int], workers: int,
                                              queue: str, heuristic: str, partitions: int,
                                              gap_ms: int) -> None:
    """A delta row stage then sessionize: same rows, same order, packet by packet."""
    packets = packets_of(keys, cuts)
    gap = f"{gap_ms} milliseconds"
    delta_schema = make_registered("delta(v)").output_schema
    stages = [Keyed("delta", lambda p: make_registered("delta(v)"), ("k",), partitions),
              Keyed("sessions", lambda p: build_operator(
                  parse_stage(f"sessionize({gap})"), delta_schema, ["k"], "ts",
                  ("count(*) as n", "sum(v) as total", "first(delta_v) as d0")),
                  ("k",), partitions)]
    run = KeyedPipeline(stages, workers=workers, queue=queue, heuristic=heuristic,
                        quantum=0.0005).run(packets)
    delta, sessions = make_registered("delta(v)"), build_operator(
        parse_stage(f"sessionize({gap})"), delta_schema, ["k"], "ts",
        ("count(*) as n", "sum(v) as total", "first(delta_v) as d0"))
    expected = [sessions.update(delta.update(t, b), b) for t, b in packets]
    tail = delta.finish()
    expected += [sessions.update(tail, None), sessions.finish()]
    want = pa.concat_tables(expected)
    assert run.table() is not None
    got = run.table()
    assert got is not None
    assert got.equals(want)
    assert [t.num_rows for t in run.outputs[:-1]] == [t.num_rows for t in expected[:-2]]
    assert len(run.latencies) == len(packets)
    assert run.bounds == [b for _, b in packets] + [None]


def test_sessions_of_many_partitions_come_out_in_session_order() -> None:
    """Without the closing sort, partition order would put these sessions out of order."""
    packets = packets_of([i % 50 for i in range(400)], [100, 250])
    for queue in QUEUES:
        got = KeyedPipeline([Keyed("s", lambda p: make_sessionize("2 milliseconds"), ("k",))],
                            workers=3, queue=queue).run(packets).table()
        assert got is not None
        assert got.equals(sequential(make_sessionize("2 milliseconds"), packets))
        ends = got.column("session_end").to_numpy()
        assert (np.diff(ends) >= 0).all()
        assert len(set(ends.tolist())) > 1


def test_latency_is_measured_per_packet_with_a_paced_source() -> None:
    packets = packets_of(list(range(60)), [10, 20, 30, 40, 50])

    def paced() -> Iterator[tuple[pa.Table, int | None]]:
        for packet in packets:
            time.sleep(0.01)
            yield packet

    run = KeyedPipeline([Keyed("sum", lambda p: make(RunningSum), ("k",))], workers=2).run(
        paced())
    assert len(run.latencies) == len(packets)
    assert all(0 <= x < run.seconds for x in run.latencies)
    assert run.seconds >= 0.06
    got = run.table()
    assert got is not None
    assert got.equals(sequential(make(RunningSum), packets))


#: Registered row operators with arguments valid for SCHEMA (whichever exist when tests run).
REGISTERED = ("delta(v)", "lag(v)", "where(v > 3)")


def test_every_registered_row_operator_matches_a_sequential_run() -> None:
    packets = packets_of([i % 5 for i in range(200)], [30, 31, 90, 150])
    texts = [t for t in REGISTERED if t.split("(")[0] in operator_names()]
    for text in texts:
        make_op = lambda p, text=text: make_registered(text)  # noqa: E731
        for queue in QUEUES:
            pipe = KeyedPipeline([Keyed(text, make_op, ("k",), 5)], workers=2, queue=queue)
            got = pipe.run(packets).table()
            assert got is not None
            assert got.equals(sequential(make_registered(text), packets)), text


def test_partitioned_queue_with_skew_still_matches() -> None:
    packets = packets_of([0] * 500 + list(range(500)), [100, 400, 700])
    for queue in QUEUES:
        got = KeyedPipeline([Keyed("sum", lambda p: make(RunningSum), ("k",))], workers=3,
                            queue=queue).run(packets).table()
        assert got is not None
        assert got.equals(sequential(make(RunningSum), packets))


def test_operator_errors_reach_the_caller() -> None:
    def broken(table: pa.Table) -> pa.Table:
        raise ValueError("bad packet")

    with pytest.raises(ValueError, match="bad packet"):
        KeyedPipeline([Stateless("x", broken)], workers=2).run(packets_of([1, 2], []))


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigError, match="heuristic"):
        KeyedPipeline([Stateless("x", keep_odd_v)], heuristic="fifo")
    with pytest.raises(ConfigError, match="workers"):
        KeyedPipeline([], workers=0)
