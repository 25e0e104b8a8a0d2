"""``udf(module:function)``: per-key user functions equal the oracle; errors name key and rows."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator
from spark_stream_sched.runtime.keyed.user import UserFunction, keyed_function
from spark_stream_sched.runtime.query import QuerySpec
from spark_stream_sched.runtime.state.snapshot import decode, encode
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
    # the reason and the fix come first, on one line (pyarrow's schema has a line per field)
    assert "\n" not in text
    assert text.endswith(" returned other columns than its output_schema: return its columns, "
                         "in its order and types; it returned (x string), output_schema is "
                         "(x int64)")


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


# -- the import path is checked before anything is imported; restore imports only the query's --

def side_effect_module(directory: Path, body: str) -> tuple[str, Path]:
    """A module (unique name) in ``directory`` that creates a marker file when imported."""
    name = f"udf_side_effect_{uuid.uuid4().hex}"
    marker = directory / f"{name}.ran"
    (directory / f"{name}.py").write_text(
        "import pyarrow as pa\n"
        "from spark_stream_sched.runtime.keyed.user import keyed_function\n"
        f"open({str(marker)!r}, 'w').close()\n" + body)
    return name, marker


@pytest.mark.parametrize(("body", "function"), [
    ("def other(key, rows, state):\n    return None\n", "x"),  # no such function
    ("def f(key, rows, state):\n    return None\n", "f"),  # not decorated
    ("f = 3\n", "f"),
])
def test_a_module_without_the_keyed_function_is_refused_without_running_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, function: str) -> None:
    name, marker = side_effect_module(tmp_path, body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=rf"operator 'udf\({name}:{function}\)'.*"
                                          r"not decorated with @keyed_function.*none of its"):
        build(f"udf({name}:{function})", ["k"])
    assert not marker.exists()


def test_a_plain_module_at_the_head_of_a_dotted_path_is_refused_without_running_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """udf(this.tests.runtime.keyed.udfs:summary) used to print the Zen of Python, then fail:
    the tail of the path was found on sys.path, as if the plain module ``this`` were a package."""
    name, marker = side_effect_module(tmp_path, "")
    package = tmp_path / f"pkg_{uuid.uuid4().hex}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "udfs.py").write_text(
        "import pyarrow as pa\n"
        "from spark_stream_sched.runtime.keyed.user import keyed_function\n"
        "@keyed_function(output_schema=pa.schema([('n', pa.int64())]))\n"
        "def f(key, rows, state):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = f"{name}.{package.name}.udfs:f"
    with pytest.raises(ConfigError, match=rf"operator 'udf\({re.escape(path)}\)'.*"
                                          rf"module {name!r} is not a package.*none of"):
        build(f"udf({path})", ["k"])
    assert not marker.exists()


def test_a_decorated_function_is_imported_and_runs(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    name, marker = side_effect_module(tmp_path, (
        "@keyed_function(output_schema=pa.schema([('n', pa.int64())]))\n"
        "def count(key, rows, state):\n"
        "    return pa.table({'n': [rows.num_rows]})\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    op = build(f"udf({name}:count)", ["k"])
    assert marker.exists()
    assert op.update(table([{"k": "a"}, {"k": "a"}]), None).column("n").to_pylist() == [2]


@pytest.mark.parametrize("path", [
    "../../tmp/evil:f", "/tmp/evil:f", "tmp/evil:f", ".evil:f", "evil..x:f", "evil:",
    ":f", "evil:f.g", "evil:1f", "C:\\evil:f", "evil:f ; x",
])
def test_an_import_path_of_another_shape_is_a_config_error(path: str) -> None:
    with pytest.raises(ConfigError, match=r"operator 'udf\(.*\)': .* is not an import path of "
                                          r"the form package\.module:function"):
        build(f"udf({path})", ["k"])


def forged(data: bytes, path: str, *, outer: bool = True) -> bytes:
    """A pipeline snapshot whose udf stage names ``path`` (its checksums recomputed)."""
    meta, tables = decode(data, "keyed_pipeline")
    op_meta, op_tables = decode(tables["op0"].column("b")[0].as_py(), "keyed.udf")
    op_meta["path"] = path
    tables["op0"] = pa.table({"b": [encode("keyed.udf", op_meta, op_tables)]})
    if outer:
        meta["stages"] = [f"udf({path})"]
    return encode("keyed_pipeline", meta, tables)


def test_restore_refuses_state_naming_another_function_before_importing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name, marker = side_effect_module(tmp_path, (
        "@keyed_function(output_schema=pa.schema([('n', pa.int64())]))\n"
        "def f(key, rows, state):\n    return None\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = f"udf({HERE}:every_other)"
    spec = QuerySpec(1, 0, 0, (), key_columns=("k",), operators=(mine,))
    group = spec.build_group(SCHEMA)
    group.update(table([{"k": "a", "v": 1.0}]), None)
    data = group.snapshot()
    with pytest.raises(StateError, match=rf"holds the operators \['udf\({name}:f\)'\] but the "
                                         rf"query defines \['{re.escape(mine)}'\]"):
        spec.build_group(SCHEMA, forged(data, f"{name}:f"))
    with pytest.raises(StateError, match=rf"holds operator 'udf\({name}:f\)' but the query "
                                         rf"defines '{re.escape(mine)}'"):
        spec.build_group(SCHEMA, forged(data, f"{name}:f", outer=False))
    assert not marker.exists()
    assert spec.build_group(SCHEMA, data).snapshot() == data


def test_restore_refuses_state_of_other_stages() -> None:
    written = QuerySpec(1, 0, 0, (), key_columns=("k",), operators=("delta(v) as d",))
    group = written.build_group(SCHEMA)
    group.update(table([{"k": "a", "v": 1.0}]), None)
    other = QuerySpec(1, 0, 0, (), key_columns=("k",), operators=("lag(v) as d",))
    with pytest.raises(StateError, match=r"\['delta\(v\) as d'\] but the query defines "
                                         r"\['lag\(v\) as d'\]"):
        other.build_group(SCHEMA, group.snapshot())
