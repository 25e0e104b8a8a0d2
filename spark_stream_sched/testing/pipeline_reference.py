"""The obviously-correct reference for whole queries with keyed operators (pipelines).

Merge all inputs in the total order (:func:`~.reference.merged_rows`), apply ``where``, then
each stage's per-tuple reference (:mod:`.keyed_reference`, :mod:`.session_reference`) one after
another, then the windows with :func:`~.reference.fold` — plain Python over row dicts. Only the
schemas of the stages' outputs are taken from the runtime (to turn row dicts back into tables
with the right types); nothing is computed by it.
"""

from __future__ import annotations

import importlib
from collections import defaultdict
from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.aggregates import parse_aggregates
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.keyed.pipeline import (
    INTERNAL,
    Pipeline,
    parse_stages,
    with_internal_columns,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.testing import keyed_reference as ref
from spark_stream_sched.testing.join_reference import reference_join
from spark_stream_sched.testing.reference import _key_order, _ms, fold, group_key, merged_rows
from spark_stream_sched.testing.session_reference import reference_sessions

Row = dict[str, Any]


def reference_pipeline(inputs: list[pa.Table], spec: QuerySpec) -> list[Row]:
    """Expected result rows of ``spec`` over the finite ``inputs`` (all inputs finished).

    Windows and sessions come in their output order; rows in the total order of the tuples
    that produced them, without ``__input``/``__seq``.
    """
    schema = with_internal_columns(inputs[0].schema)
    rows = merged_rows(inputs, spec.timestamp_column, spec.out_of_order)
    if spec.where is not None:
        where = Predicate.compile(spec.where, inputs[0].schema)
        rows = [r for r in rows if where.evaluate_row(r)]
    table = pa.Table.from_pylist([{n: r[n] for n in schema.names} for r in rows], schema)
    if not spec.operators:
        return _windows(table, spec)
    stages = parse_stages(spec.operators)
    runtime = spec.build_group(inputs[0].schema)
    assert isinstance(runtime, Pipeline)
    keys, ts = list(spec.key_columns), spec.timestamp_column
    for stage, op in zip(stages, runtime.operators, strict=True):
        if not op.emits_rows:
            return reference_sessions(table, keys, _gap(stage), spec.aggregates, ts)
        table = pa.Table.from_pylist(_stage(stage, table, keys, ts), op.output_schema)
    if spec.window is None:
        rows_out: list[Row] = table.drop_columns(list(INTERNAL)).to_pylist()
        return rows_out
    return _windows(table, spec)


def _stage(stage: StageSpec, table: pa.Table, keys: list[str], ts: str) -> list[Row]:
    """One row stage's reference output."""
    args, alias = list(stage.args), stage.alias
    match stage.name:
        case "running":
            return ref.reference_running(table, keys, args, alias)
        case "delta":
            return ref.reference_delta(table, keys, args[0], alias)
        case "lag":
            return ref.reference_lag(table, keys, args[0], int(args[1]) if len(args) > 1 else 1,
                                     alias)
        case "dedup":
            within = parse_duration(str(stage.keyword("within")), "within")
            return ref.reference_dedup(table, keys, args, within, ts)
        case "where":
            return ref.reference_where(table, args[0])
        case "join":
            n = int(args[0]) if args else 2
            join_within = stage.keyword("within")
            window = None if join_within is None else parse_duration(join_within, "within")
            return reference_join(table, keys, n, window, ts)
        case "udf":
            module, _, name = args[0].partition(":")
            function = getattr(importlib.import_module(module), name)
            return ref.reference_udf(table, keys, function, ts)
    raise AssertionError(f"no reference for operator {stage.name!r}")


def _gap(stage: StageSpec) -> int:
    text = stage.args[0] if stage.args else str(stage.keyword("gap"))
    return parse_duration(text, "gap")


def _windows(table: pa.Table, spec: QuerySpec) -> list[Row]:
    """The windows over the pipeline's rows (the loop of :func:`.reference_aggregate`)."""
    window = spec.window
    assert window is not None
    keys = list(spec.key_columns)
    groups: dict[tuple[int, tuple[Any, ...]], list[Row]] = defaultdict(list)
    for row in ref.ordered(table, spec.timestamp_column):
        for k in window.windows_of(_ms(row[spec.timestamp_column])):
            groups[(k, group_key(row, keys))].append(row)
    out = []
    for k, key in sorted(groups, key=lambda g: (g[0], _key_order(g[1]))):
        start = k * window.slide_ms
        result: Row = {"window_start": start, "window_end": start + window.size_ms}
        result.update(zip(keys, key, strict=True))
        for agg in parse_aggregates(list(spec.aggregates)):
            result[agg.alias] = fold(agg, groups[(k, key)], table.schema)
        out.append(result)
    return out
