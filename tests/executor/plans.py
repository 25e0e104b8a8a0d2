"""Hypothesis generators of executor plans and inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan

AGGREGATES = ["count(*) as n", "sum(x) as sx", "min(x) as lo", "max(x) as hi",
              "first(x) as fx", "last(x) as lx", "count(x) as cx"]


@st.composite
def inputs(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 240))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 40_000, n))
    x = rng.integers(-50, 100, n)
    null_x = rng.random(n) < draw(st.sampled_from([0.0, 0.1]))
    return pa.table({
        "ts": pa.array(ts, pa.int64()),
        "k": pa.array(rng.integers(0, 4, n), pa.int64()),
        "x": pa.array(x, pa.int64(), mask=null_x),
    })


@st.composite
def stateless_op(draw: st.DrawFn, op_id: str, source: str, columns: list[str]) -> OperatorDef:
    kind = draw(st.sampled_from(["filter", "map", "project"]))
    if kind == "filter":
        bound = draw(st.integers(-60, 110))
        pred = draw(st.sampled_from([f"x < {bound}", f"x >= {bound} or k = 1", "x is null",
                                     f"not (x > {bound})"]))
        return OperatorDef(op_id, OperatorKind.FILTER, (source,), params={"predicate": pred})
    if kind == "map":
        fn, arg = draw(st.sampled_from([("multiply", 3), ("add", 7), ("subtract", 1)]))
        target = draw(st.sampled_from(["x", "y"]))
        if target == "y":
            columns.append("y")
        return OperatorDef(op_id, OperatorKind.MAP, (source,),
                           params={"column": target, "function": fn, "args": ["x", arg]})
    keep = ["ts", "k", "x", *draw(st.lists(st.sampled_from(columns[3:] or ["x"]), max_size=1))]
    columns[:] = list(dict.fromkeys(keep))
    return OperatorDef(op_id, OperatorKind.PROJECT, (source,),
                       params={"columns": list(dict.fromkeys(keep))})


@st.composite
def query(draw: st.DrawFn, q: int, stream: str) -> list[OperatorDef]:
    ops: list[OperatorDef] = []
    columns = ["ts", "k", "x"]
    source = stream
    for i in range(draw(st.integers(0, 3))):
        ops.append(draw(stateless_op(f"q{q}_op{i}", source, columns)))
        source = ops[-1].op_id
    top = draw(st.sampled_from(["window", "window", "keyed", "none"]))
    if top == "window":
        size = draw(st.sampled_from([1000, 3000, 5000]))
        slide = draw(st.sampled_from([s for s in (1000, 2500, 5000) if s <= size]))
        aggs = draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=3, unique=True))
        keys = draw(st.sampled_from([[], ["k"]]))
        params: dict[str, Any] = {"size": size, "slide": slide, "keys": keys, "aggregates": aggs}
        ops.append(OperatorDef(f"q{q}_win", OperatorKind.WINDOW_AGGREGATE, (source,),
                               params=params))
    elif top == "keyed":
        fn = draw(st.sampled_from(["running_count", "running_sum"]))
        ops.append(OperatorDef(f"q{q}_key", OperatorKind.KEYED, (source,),
                               params={"keys": ["k"], "function": fn, "column": "x",
                                       "output": "run"}))
    if not ops:
        ops.append(OperatorDef(f"q{q}_op0", OperatorKind.FILTER, (stream,),
                               params={"predicate": "k >= 0"}))
    return ops


@st.composite
def plans(draw: st.DrawFn) -> QueryPlan:
    """One to three queries over one or two streams (queries on a stream share its input)."""
    ops: list[OperatorDef] = []
    for q in range(draw(st.integers(1, 3))):
        ops.extend(draw(query(q, draw(st.sampled_from(["s0", "s1"])))))
    return QueryPlan(ops)
