"""The obviously-correct batch oracle of the N-way join (:mod:`~..runtime.keyed.join`).

Walk every row in the total order ``(ts, input, seq)``; keep, per key, the rows seen so far of
each input; for each row, loop over every combination of one earlier row of each other input
(``itertools.product``, input 0 first, each input's rows in order) and keep the combinations
whose key is equal (nulls never match) and whose event times satisfy ``max - min < within``.
Each result is therefore produced once, by its last tuple, and the list is ordered by that
completing tuple's position, then by the partners' positions, input 0's partner first: the
operator's order when nothing is spilled. Written for clarity, not speed.
"""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.keyed_reference import _ms, key_of, ordered

Row = dict[str, Any]


def reference_join(table: pa.Table, key_columns: list[str], n_inputs: int, within: int | None,
                   ts: str = "ts") -> list[Row]:
    """Every join result of ``table``'s rows as dicts equal to the operator's ``to_pylist()``."""
    hidden = {ts, *key_columns, INPUT_COL, SEQ_COL}
    payload = [c for c in table.column_names if c not in hidden and not c.startswith("__")]
    earlier: dict[tuple[Any, ...], list[list[Row]]] = {}
    results: list[Row] = []
    for row in ordered(table, ts):
        if any(row[c] is None for c in key_columns):
            continue
        seen = earlier.setdefault(key_of(row, key_columns), [[] for _ in range(n_inputs)])
        me = row[INPUT_COL]
        choices = [[row] if j == me else seen[j] for j in range(n_inputs)]
        for combo in itertools.product(*choices):
            times = [_ms(r[ts]) for r in combo]
            if within is None or max(times) - min(times) < within:
                results.append(_result(row, combo, key_columns, payload, ts))
        seen[me].append(row)
    return results


def _result(last: Row, combo: tuple[Row, ...], key_columns: list[str], payload: list[str],
            ts: str) -> Row:
    """One output row: the completing tuple's ts/input/seq and keys, then each input's columns."""
    out = {ts: last[ts], INPUT_COL: last[INPUT_COL], SEQ_COL: last[SEQ_COL]}
    out.update({c: last[c] for c in key_columns})
    for j, row in enumerate(combo):
        out.update({f"{c}_{j}": row[c] for c in (*payload, ts)})
    return out
