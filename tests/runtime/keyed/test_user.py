"""``udf(module:function)``: per-key user functions equal the oracle; errors name key and rows."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator
from spark_stream_sched.runtime.keyed.user import UserFunction, keyed_function
from spark_stream_sched.testing.keyed_reference import reference_udf

from . import udfs
from .test_rows import KEYS, PROFILE, SCHEMA, assert_same, build, chunking, keyed_rows, run, table

HERE = udfs.__name__


@PROFILE
@given(keyed_rows(), KEYS, st.data())
def test_udf_equals_reference_for_any_chunking(rows, keys, data) -> None:
    def make() -> KeyedOperator:
        return build(f"udf({HERE}:every_other)", keys)
    expected = reference_udf(rows, keys, udfs.every_other)
    assert_same(run(make, rows, data.draw(chunking(rows))), expected)


@PROFILE
@given(keyed_rows(), KEYS)
def test_udf_rows_without_attribution_follow_the_last_tuple(rows, keys) -> None:
    op = build(f"udf({HERE}:summary)", keys)
    assert_same(op.update(rows, None), reference_udf(rows, keys, udfs.summary))


def test_state_is_json_round_tripped_and_survives_restore() -> None:
    rows = table([{"k": "a", "v": 0.1, "s": "x"}, {"k": "a", "v": 0.2, "s": None}])
    op = build(f"udf({HERE}:every_other)", ["k"])
    first = op.update(rows.slice(0, 1), 1)
    restored = UserFunction.restore(op.snapshot())
    assert restored.snapshot() == op.snapshot()
    second = restored.update(rows.slice(1), None)
    assert first.num_rows == 0
    assert second.to_pylist() == [{"ts": 1, "__input": 0, "__seq": 1, "k": "a",
                                   "total": 0.1 + 0.2, "n": 2, "tag": "x/None"}]


def test_wrong_schema_names_function_key_and_positions() -> None:
    op = build(f"udf({HERE}:wrong_schema)", ["k"])
    rows = table([{"k": "b"}, {"k": "a"}, {"k": "b"}])
    with pytest.raises(InputError) as info:
        op.update(rows, None)
    text = str(info.value)
    assert f"{HERE}:wrong_schema" in text
    assert "for key ('a',)" in text or "for key ('b',)" in text
    assert "(input 0, seq 1) .. (input 0, seq 1)" in text or \
        "(input 0, seq 0) .. (input 0, seq 2)" in text


def test_exception_inside_is_chained_with_key_and_positions() -> None:
    op = build(f"udf({HERE}:raising)", [])
    with pytest.raises(InputError, match=r"for key \(\) .*\(input 0, seq 0\) \.\. "
                                         r"\(input 0, seq 1\) raised ZeroDivisionError") as info:
        op.update(table([{"k": "a"}, {"k": "b"}]), None)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_state_that_is_not_json_is_a_state_error_naming_the_key() -> None:
    op = build(f"udf({HERE}:bad_state)", ["k"])
    with pytest.raises(StateError, match=r"bad_state.*key \('a',\)"):
        op.update(table([{"k": "a"}]), None)


@pytest.mark.parametrize(("path", "message"), [
    (f"{HERE}:not_decorated", "not decorated with @keyed_function"),
    (f"{HERE}:missing", "cannot import"),
    ("no_such_module_xyz:f", "cannot import"),
    ("no_colon", "package.module:function"),
])
def test_bad_function_path_names_the_stage(path, message) -> None:
    with pytest.raises(ConfigError, match=f"operator 'udf\\(.*\\)'.*{message}"):
        build(f"udf({path})", ["k"])


def test_decorator_checks_schema_and_initial_state() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        keyed_function(pa.schema([("__x", pa.int64())]))
    with pytest.raises(ConfigError, match="JSON"):
        keyed_function(pa.schema([("x", pa.int64())]), initial_state={"s": {1}})


def test_output_columns_must_not_clash_with_carried_columns() -> None:
    with pytest.raises(ConfigError, match="clash"):
        build(f"udf({HERE}:every_other)", ["n"], SCHEMA.append(pa.field("n", pa.int64())))


def test_corrupt_snapshot_is_a_state_error() -> None:
    data = build(f"udf({HERE}:every_other)", ["k"]).snapshot()
    with pytest.raises(StateError, match="checksum"):
        UserFunction.restore(data[:30] + bytes([data[30] ^ 1]) + data[31:])
