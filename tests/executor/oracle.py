"""Straightforward sequential evaluation of an executor plan: the oracle of the executor tests.

Each operator is applied once to its *whole* input stream, row by row where that is the plain
definition (predicates use the row evaluator, keyed running aggregates a dict loop, windows the
reference oracle of ``testing/reference.py``). No packets, threads or strategies.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.runtime.plan import OperatorKind, QueryPlan
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import float_sum, reference_aggregate


def _filter(table: pa.Table, params: dict[str, Any]) -> pa.Table:
    pred = Predicate.compile(params["predicate"], table.schema)
    keep = [pred.evaluate_row(row) for row in table.to_pylist()]
    return table.filter(pa.array(keep, type=pa.bool_()))


def _map(table: pa.Table, params: dict[str, Any]) -> pa.Table:
    args = [table.column(a) if isinstance(a, str) else a for a in params.get("args", [])]
    values = pc.call_function(params["function"], args)
    name = params["column"]
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


def _window(table: pa.Table, params: dict[str, Any], out_schema: pa.Schema) -> pa.Table:
    spec = WindowSpec.parse(params["size"], params.get("slide"))
    rows = reference_aggregate([table], spec, list(params.get("keys", [])),
                               list(params["aggregates"]), ts=params.get("ts", "ts"))
    return pa.Table.from_pylist(rows, schema=out_schema)


def _keyed(table: pa.Table, params: dict[str, Any]) -> pa.Table:
    """Running count or sum per key; a floating sum is :func:`float_sum` of the values so far."""
    seen: dict[tuple[Any, ...], list[Any]] = {}
    count = params.get("function", "running_count") == "running_count"
    floats = not count and pa.types.is_floating(table.schema.field(params["column"]).type)
    out = []
    for row in table.to_pylist():
        values = seen.setdefault(tuple(row[k] for k in params["keys"]), [])
        values.append(1 if count else (row[params["column"]] or 0))
        out.append(float_sum(values) if floats else sum(values))
    name = params.get("output", params.get("function", "running_count"))
    return table.append_column(name, pa.array(out, type=pa.float64() if floats else pa.int64()))


def sequential(plan: QueryPlan, inputs: dict[str, pa.Table],
               schemas: dict[str, pa.Schema]) -> dict[str, pa.Table]:
    """Output of every root; ``schemas`` gives each window operator's output schema."""
    streams: dict[str, pa.Table] = dict(inputs)
    for op in plan.operators:
        d = plan[op]
        table = streams[d.inputs[0]]
        params = dict(d.params)
        if d.kind in (OperatorKind.FILTER, OperatorKind.SELECT):
            streams[op] = _filter(table, params)
        elif d.kind is OperatorKind.PROJECT:
            streams[op] = table.select(params["columns"])
        elif d.kind is OperatorKind.MAP:
            streams[op] = _map(table, params)
        elif d.kind is OperatorKind.WINDOW_AGGREGATE:
            streams[op] = _window(table, params, schemas[op])
        else:
            streams[op] = _keyed(table, params)
    return {op: streams[op] for op in plan.operators if plan.is_root(op)}
