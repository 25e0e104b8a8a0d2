"""The input schema recorded in a state location: ``<location>/_input_schema.json``.

A stream's input schema, when not declared, is inferred from the first file that holds a row.
Inferred again at a restart, after consumed files were deleted, it could come out otherwise (a
value column double at the first start, int64 from a later file whose values happen to be
whole): the state's rows and the output would then change type mid-stream. So the schema
resolved at the first start is recorded here, written once as checksummed JSON
(:mod:`~.records`), and every later start reads its files with it::

    {"format": "ordered-agg-input-schema", "version": 1,
     "columns": [{"name": "ts", "type": {"id": "int64"}, "nullable": true},
                 {"name": "at", "type": {"id": "timestamp", "unit": "us", "tz": "UTC"},
                  "nullable": true}, ...]}

Each type is a typed JSON object (:func:`type_to_json`): flat types by name and parameters; a
nested type (a list or struct column of a Parquet file) as ``{"id": "arrow_ipc", "schema":
<base64>}``, the Arrow IPC encoding of a one-column schema (a data format, never code). Pure
Python + PyArrow (no pyspark).
"""

from __future__ import annotations

import base64
import os
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.records import read_record, seal

INPUT_SCHEMA_FILE = "_input_schema.json"
FORMAT = "ordered-agg-input-schema"
VERSION = 1
_ADVICE = "restore the file, or start the query with a new stateLocation and checkpointLocation"

#: Flat types without parameters, by their Arrow name.
_PLAIN: dict[str, pa.DataType] = {str(t): t for t in (
    pa.null(), pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(),
    pa.uint16(), pa.uint32(), pa.uint64(), pa.float16(), pa.float32(), pa.float64(),
    pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.date32(), pa.date64())}
_WITH_UNIT = {"timestamp": pa.timestamp, "duration": pa.duration, "time32": pa.time32,
              "time64": pa.time64}


def type_to_json(kind: pa.DataType) -> dict[str, Any]:
    """The typed JSON form of an Arrow type (see the module docstring)."""
    if str(kind) in _PLAIN:
        return {"id": str(kind)}
    if pa.types.is_timestamp(kind):
        return {"id": "timestamp", "unit": kind.unit, "tz": kind.tz}
    for name in ("duration", "time32", "time64"):
        if getattr(pa.types, f"is_{name}")(kind):
            return {"id": name, "unit": kind.unit}
    if pa.types.is_decimal(kind):
        return {"id": "decimal", "precision": kind.precision, "scale": kind.scale}
    ipc = pa.schema([pa.field("c", kind)]).serialize().to_pybytes()
    return {"id": "arrow_ipc", "schema": base64.b64encode(ipc).decode("ascii")}


def type_from_json(raw: Any) -> pa.DataType:
    """The Arrow type of :func:`type_to_json`'s form; ValueError when it is not one."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise ValueError(f"not a type: {raw!r}")
    kind, params = raw["id"], {k: v for k, v in raw.items() if k != "id"}
    if kind in _PLAIN and not params:
        return _PLAIN[kind]
    try:
        if kind == "timestamp" and set(params) == {"unit", "tz"}:
            return pa.timestamp(params["unit"], tz=params["tz"])
        if kind in _WITH_UNIT and set(params) == {"unit"}:
            return _WITH_UNIT[kind](params["unit"])
        if kind == "decimal" and set(params) == {"precision", "scale"}:
            return pa.decimal128(params["precision"], params["scale"])
        if kind == "arrow_ipc" and set(params) == {"schema"}:
            data = base64.b64decode(params["schema"], validate=True)
            return pa.ipc.read_schema(pa.py_buffer(data)).field(0).type
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise ValueError(f"not a type: {raw!r} ({exc})") from exc
    raise ValueError(f"not a type: {raw!r}")


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """The record of ``schema`` (its columns, types and nullability; no metadata)."""
    return {"format": FORMAT, "version": VERSION,
            "columns": [{"name": f.name, "type": type_to_json(f.type), "nullable": f.nullable}
                        for f in schema]}


def schema_from_json(raw: dict[str, Any]) -> pa.Schema:
    """The schema of a record; ValueError when the record is not one of this version."""
    columns = raw.get("columns")
    if raw.get("format") != FORMAT or raw.get("version") != VERSION or not isinstance(
            columns, list):
        raise ValueError(f"not an input schema record of version {VERSION}")
    fields = []
    for column in columns:
        if not (isinstance(column, dict) and set(column) == {"name", "type", "nullable"}
                and isinstance(column["name"], str) and isinstance(column["nullable"], bool)):
            raise ValueError(f"not a column: {column!r}")
        fields.append(pa.field(column["name"], type_from_json(column["type"]),
                               nullable=column["nullable"]))
    return pa.schema(fields)


def read_input_schema(location: str) -> pa.Schema | None:
    """The schema recorded under ``location`` (None when nothing is recorded yet).

    Raises
    ------
    StateError
        The record exists but is truncated, corrupt or not an input schema (naming the file).
    """
    path = os.path.join(location, INPUT_SCHEMA_FILE)
    if not os.path.exists(path):
        return None
    record = read_record(path, "the recorded input schema", _ADVICE)
    try:
        return schema_from_json(record)
    except ValueError as exc:
        raise StateError(f"the recorded input schema {path} is corrupt ({exc}); {_ADVICE}") \
            from exc


def record_input_schema(location: str, schema: pa.Schema) -> None:
    """Write ``schema`` as ``location``'s input schema unless one is recorded.

    Notes
    -----
    Called on the driver when a stream starts (``streamReader``), next to the query record.
    """
    path = os.path.join(location, INPUT_SCHEMA_FILE)
    if not os.path.exists(path):
        atomic_write(path, seal(schema_to_json(schema), indent=1))
