"""User functions for the ``udf`` tests (a module without tests, so importing it by its
``module:function`` path from inside a Hypothesis test runs no ``@given`` decorator)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_stream_sched.runtime.keyed.user import keyed_function


@keyed_function(output_schema=pa.schema([("total", pa.float64()), ("n", pa.int64()),
                                         ("tag", pa.string())]),
                initial_state={"total": 0.0, "n": 0, "tags": []})
def every_other(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> pa.Table:
    """Every second tuple of a key: the running total of v, the count and the last 2 tags."""
    out: dict[str, list[Any]] = {"total": [], "n": [], "tag": [], "__row": []}
    for j, (v, s) in enumerate(zip(rows.column("v").to_pylist(), rows.column("s").to_pylist(),
                                   strict=True)):
        state["n"] += 1
        state["total"] = state["total"] + (v or 0.0)
        state["tags"] = ([*state["tags"], s])[-2:]
        if state["n"] % 2 == 0:
            out["total"].append(state["total"])
            out["n"].append(state["n"])
            out["tag"].append("/".join(str(t) for t in state["tags"]))
            out["__row"].append(j)
    return pa.table(out, schema=every_other.output_schema.append(pa.field("__row", pa.int64())))


@keyed_function(output_schema=pa.schema([("rows", pa.int64())]))
def summary(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> pa.Table:
    """One row per call, attributed to the call's last tuple."""
    return pa.table({"rows": [rows.num_rows]})


@keyed_function(output_schema=pa.schema([("x", pa.int64())]))
def wrong_schema(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> pa.Table:
    """Returns a string column where an int64 is declared."""
    return pa.table({"x": ["oops"]})


@keyed_function(output_schema=pa.schema([("x", pa.int64())]))
def raising(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> None:
    """Raises a ZeroDivisionError."""
    _ = 1 // 0


@keyed_function(output_schema=pa.schema([("x", pa.int64())]))
def bad_state(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> None:
    """Leaves a set (not JSON) in its state."""
    state["seen"] = {1, 2}


def not_decorated(key: tuple[Any, ...], rows: pa.Table, state: dict[str, Any]) -> None:
    """A plain function, without @keyed_function."""
