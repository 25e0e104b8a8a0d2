"""The obviously-correct session oracle: sort by the total order, one tuple at a time.

Plain Python over row dicts, written for clarity, not speed. It restates the semantics of
:mod:`spark_stream_sched.runtime.keyed.sessions` (Spark's ``session_window`` with a static gap,
Prasaad et al. (2018), Table 1, TPCx-BB Q2/Q4: a tuple at most ``gap`` after the last tuple of its
key's session joins it, as Spark merges touching event windows; keys group as in Spark: nulls are
one key, ``-0.0`` is ``0.0``, NaN is NaN) and shares only the parsers and :func:`~.reference.fold`
with the runtime. A session's key columns hold its key as Spark emits it (``-0.0`` as ``0.0``,
NaN as the quiet NaN).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.aggregates import parse_aggregates
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.reference import _key_order, fold, group_key


def reference_sessions(rows: pa.Table, keys: list[str], gap_ms: int,
                       aggregates: list[str] | tuple[str, ...], ts: str = "ts"
                       ) -> list[dict[str, Any]]:
    """Expected output rows of ``sessionize(gap)`` over ``rows`` (all of them, input finished).

    ``rows`` carry ``ts`` (int64 ms), the key columns, the aggregated columns and the
    ``__input``/``__seq`` identity columns; their order does not matter (they are sorted here).
    """
    specs = parse_aggregates(list(aggregates)) if aggregates else []
    ordered = sorted(rows.to_pylist(), key=lambda r: (r[ts], r[INPUT_COL], r[SEQ_COL]))
    open_sessions: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    sessions: list[list[dict[str, Any]]] = []
    for row in ordered:
        key = group_key(row, keys)
        current = open_sessions.get(key)
        if current is not None and row[ts] <= current[-1][ts] + gap_ms:
            current.append(row)
            continue
        if current is not None:
            sessions.append(current)
        open_sessions[key] = [row]
    sessions.extend(open_sessions.values())
    out = []
    for members in sessions:
        result: dict[str, Any] = {"session_start": members[0][ts],
                                  "session_end": members[-1][ts] + gap_ms}
        result.update(zip(keys, group_key(members[0], keys), strict=True))
        for spec in specs:
            result[spec.alias] = fold(spec, members, rows.schema)
        out.append(result)
    return sorted(out, key=lambda r: (r["session_end"], r["session_start"],
                                      _key_order(tuple(r[c] for c in keys))))
