"""The obviously-correct reference for the keyed operators: sort, then one plain loop per tuple.

Each function takes every row an operator was given (any order, ``__input``/``__seq`` included),
sorts them by the total order ``(ts, __input, __seq)`` and walks them one at a time with a dict
of per-key state, written for clarity, not speed. Outputs are lists of row dicts equal to the
operator's output ``to_pylist()`` (floats bit for bit). Running aggregates refold the key's
rows so far; a floating sum is :func:`~.reference.float_sum` of them (:func:`math.fsum`, the
rule of ``docs/aggregates.md``), an integer sum Python's exact ``sum``. NaN values are out of
scope for ``min``/``max`` here (Python comparisons with NaN are order-dependent; the operator
orders NaN above every number).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.aggregates import AggSpec, parse_aggregates
from spark_stream_sched.runtime.keyed.user import ROW_COL, KeyedFunction
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.testing.reference import by_order, total

Row = dict[str, Any]


def ordered(table: pa.Table, ts: str = "ts") -> list[Row]:
    """The rows of ``table`` as dicts in the total order ``(ts, input, seq)``."""
    return sorted(table.to_pylist(), key=lambda r: (_ms(r[ts]), r[INPUT_COL], r[SEQ_COL]))


def _ms(value: Any) -> int:
    """Event time in ms: ints as they are, datetimes floored to whole milliseconds."""
    if isinstance(value, datetime):
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc if value.tzinfo else None)
        return (value - epoch) // timedelta(milliseconds=1)
    return int(value)


def _same(value: Any) -> Any:
    """A value as a dict key: NaN equals NaN, ``-0.0`` equals ``0.0`` (Spark's grouping)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return value


def key_of(row: Row, columns: list[str]) -> tuple[Any, ...]:
    """The row's values of ``columns`` as a hashable tuple."""
    return tuple(_same(row[c]) for c in columns)


def running_fold(spec: AggSpec, predicate: Predicate | None, rows: list[Row]) -> Any:
    """One aggregate over a key's rows so far, in tuple order."""
    column = spec.column
    values = [r[column] for r in rows] if column not in (None, "*") else []
    present = [v for v in values if v is not None]
    hits = [r for r in rows if predicate is not None and predicate.evaluate_row(r)]
    func = spec.func
    if func == "count":
        return len(rows) if column == "*" else len(present)
    if func == "count_where":
        return len(hits)
    if func in ("sum", "avg"):
        if not present:
            return None
        result = total(present)
        return result if func == "sum" else result / len(present)
    if func in ("min", "max"):
        best = None
        for value in present:
            if best is None or (value < best if func == "min" else value > best):
                best = value
        return best
    if func in ("first", "last"):
        return values[0] if func == "first" else values[-1]
    if func in ("max_by", "min_by"):
        return by_order(spec, rows)
    if not hits or column is None:
        return None
    return hits[0][column] if func == "first_where" else hits[-1][column]


def reference_running(table: pa.Table, keys: list[str], aggregates: list[str],
                      alias: str | None = None) -> list[Row]:
    """Expected output of ``running(<aggregates>) [as alias]``."""
    specs = parse_aggregates(aggregates)
    names = [alias] if alias is not None else [s.alias for s in specs]
    predicates = [Predicate.compile(s.predicate, table.schema) if s.predicate else None
                  for s in specs]
    seen: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    out = []
    for row in ordered(table):
        so_far = seen[key_of(row, keys)]
        so_far.append(row)
        out.append({**row, **{name: running_fold(spec, predicate, so_far) for name, spec, predicate
                              in zip(names, specs, predicates, strict=True)}})
    return out


def reference_delta(table: pa.Table, keys: list[str], column: str,
                    name: str | None = None) -> list[Row]:
    """Expected output of ``delta(column)``: null for a key's first tuple or any null side."""
    previous: dict[tuple[Any, ...], Any] = {}
    out = []
    for row in ordered(table):
        key, value = key_of(row, keys), row[column]
        if isinstance(value, datetime):
            value = _ms(value)
        before = previous.get(key)
        delta = None if key not in previous or value is None or before is None else (
            value - before)
        previous[key] = value
        out.append({**row, name or f"delta_{column}": delta})
    return out


def reference_lag(table: pa.Table, keys: list[str], column: str, n: int,
                  name: str | None = None) -> list[Row]:
    """Expected output of ``lag(column, n)``."""
    history: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    out = []
    for row in ordered(table):
        values = history[key_of(row, keys)]
        out.append({**row, name or f"lag_{column}_{n}": values[-n] if len(values) >= n else None})
        values.append(row[column])
    return out


def reference_dedup(table: pa.Table, keys: list[str], columns: list[str], within_ms: int,
                    ts: str = "ts") -> list[Row]:
    """Expected output of ``dedup(columns, within=...)``: the rows kept, unchanged."""
    anchor: dict[tuple[Any, ...], int] = {}
    out = []
    for row in ordered(table, ts):
        entry, t = key_of(row, keys + columns), _ms(row[ts])
        if entry not in anchor or t >= anchor[entry] + within_ms:
            anchor[entry] = t
            out.append(row)
    return out


def reference_where(table: pa.Table, predicate: str) -> list[Row]:
    """Expected output of ``where(predicate)``."""
    compiled = Predicate.compile(predicate, table.schema)
    return [row for row in ordered(table) if compiled.evaluate_row(row)]


def reference_udf(table: pa.Table, keys: list[str], function: KeyedFunction,
                  ts: str = "ts") -> list[Row]:
    """Expected output of ``udf(...)`` with each key's rows given to the function in one call."""
    rows_of: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for row in ordered(table, ts):
        rows_of[key_of(row, keys)].append(row)
    produced: list[tuple[tuple[int, int, int], int, Row]] = []
    for rows in rows_of.values():
        key = tuple(rows[0][c] for c in keys)
        state = json.loads(function.initial_state)
        result = function(key, pa.Table.from_pylist(rows, schema=table.schema), state)
        for i, out in enumerate(result.to_pylist() if result is not None else []):
            source = rows[out.pop(ROW_COL, len(rows) - 1)]
            head = {c: source[c] for c in dict.fromkeys([ts, INPUT_COL, SEQ_COL, *keys])}
            position = (_ms(source[ts]), source[INPUT_COL], source[SEQ_COL])
            produced.append((position, i, {**head, **out}))
    return [row for _, _, row in sorted(produced, key=lambda p: (p[0], p[1]))]
