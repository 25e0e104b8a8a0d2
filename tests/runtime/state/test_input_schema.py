"""The input schema record of a state location: typed JSON, written once, checked on read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.input_schema import (
    INPUT_SCHEMA_FILE,
    read_input_schema,
    record_input_schema,
    schema_to_json,
)
from spark_stream_sched.runtime.state.records import seal

SCHEMA = pa.schema([
    pa.field("ts", pa.int64()), pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("local", pa.timestamp("ns")), pa.field("v", pa.float64(), nullable=False),
    pa.field("k", pa.large_string()), pa.field("d", pa.decimal128(12, 3)),
    pa.field("u", pa.uint64()), pa.field("gap", pa.duration("ms")), pa.field("day", pa.date32()),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("pos", pa.struct([("x", pa.float32()), ("y", pa.float32())])),
])


def test_a_schema_round_trips_and_is_written_once(tmp_path: Path) -> None:
    assert read_input_schema(str(tmp_path)) is None
    record_input_schema(str(tmp_path), SCHEMA)
    assert read_input_schema(str(tmp_path)) == SCHEMA
    record_input_schema(str(tmp_path), pa.schema([("ts", pa.int32())]))  # recorded already
    assert read_input_schema(str(tmp_path)) == SCHEMA
    text = json.loads((tmp_path / INPUT_SCHEMA_FILE).read_text())
    assert text["columns"][1] == {"name": "at", "nullable": True,
                                  "type": {"id": "timestamp", "tz": "UTC", "unit": "us"}}


def test_an_edited_record_names_the_file(tmp_path: Path) -> None:
    record_input_schema(str(tmp_path), SCHEMA)
    path = tmp_path / INPUT_SCHEMA_FILE
    path.write_text(path.read_text().replace('"int64"', '"int32"', 1))  # checksum broken
    with pytest.raises(StateError, match=rf"^the recorded input schema {path} is corrupt"):
        read_input_schema(str(tmp_path))
    record = schema_to_json(SCHEMA)
    record["columns"][0]["type"] = {"id": "int65"}  # sealed, but no type
    path.write_bytes(seal(record))
    with pytest.raises(StateError, match=rf"^the recorded input schema {path} is corrupt "
                                         rf"\(not a type: \{{'id': 'int65'\}}\)"):
        read_input_schema(str(tmp_path))
