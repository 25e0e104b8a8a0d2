"""The result order's sort (``sort_ascending``) against Python's own stable sort."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.keyed.pipeline import sort_ascending

INT64 = (-(2**63), 2**63 - 1)
TYPES = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "uint32": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "int64 small": (pa.int64(), st.integers(-5, 5)),
    "int64 any": (pa.int64(), st.integers(*INT64)),  # spans beyond int64: ranked
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "timestamp": (pa.timestamp("us", "UTC"), st.integers(-(10**15), 10**15)),
    "duration": (pa.duration("ms"), st.integers(-3, 3)),
    "string": (pa.string(), st.text(max_size=2)),
    "float": (pa.float64(), st.floats(-2, 2, allow_nan=False)),
}


@st.composite
def tables(draw: st.DrawFn, kinds_from: tuple[str, ...] = tuple(sorted(TYPES)),
           columns: tuple[int, int] = (1, 3)) -> tuple[pa.Table, list[str]]:
    """A table of 0-30 rows: columns ``c0..`` of types drawn from ``kinds_from``, and ``row``."""
    kinds = draw(st.lists(st.sampled_from(kinds_from), min_size=columns[0],
                          max_size=columns[1]))
    n = draw(st.integers(0, 30))
    nulls = draw(st.booleans())
    columns = {}
    for j, kind in enumerate(kinds):
        arrow_type, values = TYPES[kind]
        cell = st.none() | values if nulls else values
        columns[f"c{j}"] = pa.array(draw(st.lists(cell, min_size=n, max_size=n)), arrow_type)
    columns["row"] = pa.array(range(n), pa.int64())
    return pa.table(columns), [f"c{j}" for j in range(len(kinds))]


def row_key(row: dict[str, object], columns: list[str]) -> tuple[tuple[bool, object], ...]:
    """A row's sort key in Python: per column, nulls first, then the value."""
    return tuple((row[c] is not None, row[c] if row[c] is not None else 0) for c in columns)


def _expected(table: pa.Table, columns: list[str]) -> list[int]:
    """Row ids in Python's stable sort by ``columns``, nulls first."""
    return [r["row"] for r in sorted(table.to_pylist(), key=lambda r: row_key(r, columns))]


@settings(max_examples=400, deadline=None)
@given(tables())
def test_sort_ascending_is_the_stable_lexicographic_order(case: tuple[pa.Table, list[str]]
                                                          ) -> None:
    """Order codes or Arrow's sort (floats), the result is Python's stable sort, nulls first."""
    table, columns = case
    assert sort_ascending(table, columns).column("row").to_pylist() == _expected(table, columns)
