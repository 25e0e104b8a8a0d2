"""The obviously-correct reference: concatenate, sort by the total order, assign windows, fold.

Plain Python over row dicts, written for clarity, not speed; every runtime feature is checked
against it. It shares only the parsers (window durations, aggregate and predicate syntax) with
the runtime, and evaluates predicates with the row evaluator. Floating sums follow the one rule
of ``docs/aggregates.md`` through :func:`float_sum` (:func:`math.fsum`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import OutOfOrderError
from spark_stream_sched.runtime.aggregates import AggSpec, parse_aggregates
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.window.spec import WindowSpec


def merged_rows(inputs: list[pa.Table], ts: str, policy: str = "fail") -> list[dict[str, Any]]:
    """All tuples of all inputs in the total order ``(ts, input, seq)``; out-of-order per policy."""
    rows = []
    for i, table in enumerate(inputs):
        latest = None
        for seq, row in enumerate(table.to_pylist()):
            t = _ms(row[ts])
            if latest is not None and t < latest:
                if policy == "fail":
                    raise OutOfOrderError(i, seq, t, latest)
                continue
            latest = t
            rows.append({**row, "__ts": t, "__input": i, "__seq": seq})
    return sorted(rows, key=lambda r: (r["__ts"], r["__input"], r["__seq"]))


def _ms(value: Any) -> int:
    if hasattr(value, "timestamp"):  # datetime
        return int(round(value.timestamp() * 1000))
    return int(value)


def float_sum(values: list[float]) -> float:
    """The exactly rounded sum of ``values``: :func:`math.fsum`, special values spelled out.

    NaN, or both infinities, give NaN; one infinity gives itself; an exact zero is ``+0.0``.
    ``math.fsum`` raises OverflowError when a partial sum overflows even if the total does not
    (``[1e308, 1e308, -1e308]``); then the exact rational sum is rounded by ``float()`` (a
    correctly rounded integer division), and a sum beyond the largest double is ``±inf``.
    """
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values or -math.inf in values:
        return math.inf if math.inf in values else -math.inf
    try:
        return math.fsum(values) + 0.0
    except OverflowError:
        exact = sum(map(Fraction, values), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf


def total(values: list[Any]) -> Any:
    """``sum`` of non-null values: :func:`float_sum` for floats, the exact integer otherwise."""
    if any(isinstance(v, float) for v in values):
        return float_sum([float(v) for v in values])
    return sum(values)


def _order_key(value: Any) -> tuple[int, Any]:
    """Spark SQL's order of a value: NaN above every number (``-0.0 == 0.0`` holds already)."""
    return (1, 0.0) if isinstance(value, float) and math.isnan(value) else (0, value)


def by_order(spec: AggSpec, rows: list[dict[str, Any]]) -> Any:
    """``max_by``/``min_by``: the value on the first row with the largest (smallest) order."""
    best: dict[str, Any] | None = None
    key, value = str(spec.order), str(spec.column)
    for row in rows:
        order = row[key]
        if order is None:
            continue
        if best is None:
            best = row
            continue
        new, old = _order_key(order), _order_key(best[key])
        if (new > old) if spec.func == "max_by" else (new < old):
            best = row
    return None if best is None else best[value]


def fold(spec: AggSpec, rows: list[dict[str, Any]], schema: pa.Schema) -> Any:
    """Compute one aggregate over ``rows`` (already in the total order)."""
    pred = Predicate.compile(spec.predicate, schema) if spec.predicate else None
    col = spec.column
    values = [r[col] for r in rows] if col not in (None, "*") else []
    present = [v for v in values if v is not None]
    match spec.func:
        case "count":
            return len(rows) if col == "*" else len(present)
        case "sum":
            return total(present) if present else None
        case "avg":
            return total(present) / len(present) if present else None
        case "min":
            return min(present) if present else None
        case "max":
            return max(present) if present else None
        case "count_where":
            assert pred is not None
            return sum(1 for r in rows if pred.evaluate_row(r))
        case "first":
            return values[0]
        case "last":
            return values[-1]
        case "max_by" | "min_by":
            return by_order(spec, rows)
    hits = [r[col] for r in rows if pred.evaluate_row(r)]  # type: ignore[union-attr,index]
    if not hits:
        return None
    return hits[0] if spec.func == "first_where" else hits[-1]


def group_key(row: dict[str, Any], columns: list[str]) -> tuple[Any, ...]:
    """The row's key as Spark's grouping compares and emits it.

    ``-0.0`` is ``0.0`` and every NaN (any sign or payload) is the one object :data:`math.nan`,
    so equal keys are one dict key (a tuple compares its items by identity first).
    """
    return tuple(_normalised(row[c]) for c in columns)


def _normalised(value: Any) -> Any:
    if isinstance(value, float):
        return math.nan if math.isnan(value) else value + 0.0
    return value


def _key_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """Ascending key order of the results: nulls first, then NaN, then the numbers."""
    return tuple((0,) if v is None else (1,) if v != v else (2, v) for v in key)


def reference_aggregate(inputs: list[pa.Table], window: WindowSpec, keys: list[str],
                        aggregates: str | list[str], ts: str = "ts",
                        policy: str = "fail") -> list[dict[str, Any]]:
    """Expected output rows (as dicts) of a windowed aggregation over finite ``inputs``."""
    specs = parse_aggregates(aggregates)
    groups: dict[tuple[int, tuple[Any, ...]], list[dict[str, Any]]] = defaultdict(list)
    for row in merged_rows(inputs, ts, policy):
        for k in window.windows_of(row["__ts"]):
            groups[(k, group_key(row, keys))].append(row)
    out = []
    for k, key in sorted(groups, key=lambda g: (g[0], _key_order(g[1]))):
        start = k * window.slide_ms
        result = {"window_start": start, "window_end": start + window.size_ms}
        result.update(zip(keys, key, strict=True))
        for spec in specs:
            result[spec.alias] = fold(spec, groups[(k, key)], inputs[0].schema)
        out.append(result)
    return out
