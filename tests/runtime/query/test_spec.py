"""One query definition: every front door builds the same QuerySpec for the same query.

Spark source options, Spark sink options, a TOML job config and CLI flags each describe the
query in their own words (camelCase options, snake_case keys, repeated flags; durations in
different Spark interval spellings); the specs must be equal and share one fingerprint.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_stream_sched.cli import build_parser
from spark_stream_sched.commands.aggregate import query_spec
from spark_stream_sched.errors import ConfigError
from spark_stream_sched.jobs.config import parse_job_config
from spark_stream_sched.options.sink import parse_sink_options
from spark_stream_sched.options.source import parse_options
from spark_stream_sched.runtime.durations import format_duration
from spark_stream_sched.runtime.query import QuerySpec
from spark_stream_sched.runtime.query.recorded import check_recorded, record_spec

AGGREGATES = ["count(*) as n", "avg(value) as mean", "first(value) as first_v",
              "count_where(kind = 'alarm') as alarms", "last_where(value, value > 1) as lw"]


@st.composite
def queries(draw: st.DrawFn) -> dict[str, Any]:
    slide_s = draw(st.integers(1, 120))
    return {
        "n_inputs": draw(st.integers(1, 4)),
        "window_ms": slide_s * 1000 * draw(st.integers(1, 5)),
        "slide_ms": slide_s * 1000,
        "aggregates": draw(st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4,
                                    unique=True)),
        "keys": draw(st.lists(st.sampled_from(["meter", "site"]), max_size=2, unique=True)),
        "ts": draw(st.sampled_from(["ts", "event_time"])),
        "out_of_order": draw(st.sampled_from(["fail", "drop"])),
        "where": draw(st.sampled_from([None, "value > 0", "kind = 'reading'"])),
    }


def from_source(q: dict[str, Any]) -> QuerySpec:
    opts = {"inputs": ",".join(f"/data/in{j}" for j in range(q["n_inputs"])),
            "WINDOW": f"{q['window_ms'] // 1000} seconds",
            "slide": format_duration(q["slide_ms"]),
            "aggregates": ", ".join(a.upper().replace("VALUE", "value").replace("KIND", "kind")
                                    .replace("'ALARM'", "'alarm'").replace(" AS ", " as ")
                                    .replace("MEAN", "mean").replace("FIRST_V", "first_v")
                                    .replace(" N", " n").replace("ALARMS", "alarms")
                                    .replace("LW", "lw") for a in q["aggregates"]),
            "keycolumns": ",".join(q["keys"]), "timestampColumn": q["ts"],
            "outOfOrder": q["out_of_order"].upper(), "stateLocation": "/tmp/s"}
    if q["where"]:
        opts["where"] = q["where"]
    return parse_options(opts).spec


def from_sink(q: dict[str, Any]) -> QuerySpec:
    opts = {"path": "/out", "inputs": str(q["n_inputs"]),
            "window": f"interval {q['window_ms']} milliseconds",
            "slide": f"{q['slide_ms'] // 1000}s", "aggregates": ",".join(q["aggregates"]),
            "keyColumns": ", ".join(f"`{k}`" for k in q["keys"]), "timestampColumn": q["ts"],
            "outOfOrder": q["out_of_order"], "stateLocation": "/tmp/s"}
    if q["where"]:
        opts["where"] = q["where"]
    return parse_sink_options(opts).spec


def from_toml(q: dict[str, Any]) -> QuerySpec:
    lines = ["[data]", f"inputs = {q['n_inputs']}", "[query]",
             f'window = "{format_duration(q["window_ms"])}"',
             f'slide = "{q["slide_ms"] // 1000} seconds"',
             "aggregates = [" + ", ".join(_toml_str(a) for a in q["aggregates"]) + "]",
             "key_columns = [" + ", ".join(_toml_str(k) for k in q["keys"]) + "]",
             f'timestamp_column = "{q["ts"]}"', f'out_of_order = "{q["out_of_order"]}"']
    if q["where"]:
        lines.append(f"where = {_toml_str(q['where'])}")
    job = parse_job_config(tomllib.loads("\n".join(lines)))
    return job.query.spec(job.data.inputs)


def from_cli(q: dict[str, Any]) -> QuerySpec:
    argv = ["aggregate", "--out", "o.parquet", "--window", f"{q['window_ms']}ms",
            "--slide", f"{q['slide_ms'] // 1000} second", "--timestamp", q["ts"],
            "--out-of-order", q["out_of_order"]]
    argv += [a for j in range(q["n_inputs"]) for a in ("--input", f"in{j}")]
    argv += [a for agg in q["aggregates"] for a in ("--agg", agg)]
    argv += [a for k in q["keys"] for a in ("--key", k)]
    if q["where"]:
        argv += ["--where", q["where"]]
    return query_spec(build_parser().parse_args(argv))


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=60, deadline=None)
@given(queries())
def test_every_front_door_builds_the_same_spec(q: dict[str, Any]) -> None:
    specs = [from_source(q), from_sink(q), from_toml(q), from_cli(q)]
    assert specs[0] == QuerySpec(
        q["n_inputs"], q["window_ms"], q["slide_ms"], tuple(q["aggregates"]), q["ts"],
        tuple(q["keys"]), q["out_of_order"], q["where"])
    assert all(s == specs[0] for s in specs[1:])
    assert len({s.fingerprint() for s in specs}) == 1


@settings(max_examples=30, deadline=None)
@given(queries(), st.integers(1, 4096))
def test_partition_groups_from_options_and_toml(q: dict[str, Any], groups: int) -> None:
    source = parse_options({"inputs": ",".join(f"/d{j}" for j in range(q["n_inputs"])),
                            "window": f"{q['window_ms']}ms", "slide": f"{q['slide_ms']}ms",
                            "aggregates": ",".join(q["aggregates"]), "stateLocation": "/s",
                            "partitionGroups": str(groups)}).spec
    doc = {"data": {"inputs": q["n_inputs"]},
           "query": {"window": f"{q['window_ms']}ms", "slide": f"{q['slide_ms']}ms",
                     "aggregates": q["aggregates"], "key_columns": [],
                     "partition_groups": groups}}
    toml = parse_job_config(doc).query.spec(q["n_inputs"])
    assert source == toml
    assert source.fingerprint() == toml.fingerprint()


def test_fingerprint_is_stable_across_processes() -> None:
    spec = QuerySpec(2, 30_000, 3_000, ("count(*) as n",), key_columns=("meter",))
    assert spec.fingerprint() == "2f90354b5949d89b"  # a change here orphans recorded state


def test_the_group_function_lays_out_state_and_is_not_part_of_the_definition() -> None:
    spec = QuerySpec(2, 30_000, 3_000, ("count(*) as n",), key_columns=("meter",))
    murmur = replace(spec, group_function="murmur3")
    assert murmur.fingerprint() == spec.fingerprint() == "2f90354b5949d89b"
    assert "group_function" not in murmur.to_json()
    with pytest.raises(ConfigError, match="unknown partition-group function 'xxhash'; known: "
                                          "splitmix64, murmur3"):
        replace(spec, group_function="xxhash")


@pytest.mark.parametrize(("surface", "message"), [
    (lambda: parse_options({"inputs": "/a", "window": "30", "aggregates": "count(*) as n",
                            "stateLocation": "/s"}),
     r"option window='30': value '30' has no unit"),
    (lambda: query_spec(build_parser().parse_args(
        ["aggregate", "--input", "a", "--window", "30", "--agg", "count(*) as n",
         "--out", "o"])), r"--window '30': value '30' has no unit"),
    (lambda: parse_job_config({"query": {"window": "30"}}),
     r"\[query\] window: value '30' has no unit"),
    (lambda: parse_job_config({"query": {"windw": "30s"}}),
     r"\[query\] has an unknown key 'windw'; did you mean 'window'\?"),
    (lambda: parse_sink_options({"path": "/o", "inputs": "2", "window": "1 minute",
                                 "aggregates": "count(*) as n", "stateLocation": "/s",
                                 "keycolums": "k"}),
     r"unknown option 'keycolums' for the ordered-agg sink; did you mean 'keyColumns'\?"),
])
def test_every_front_door_refuses_with_one_voice(surface: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        surface()


def test_changed_definition_names_options_as_written(tmp_path) -> None:
    spec = QuerySpec(2, 10_000, 5_000, ("count(*) as n",), key_columns=("meter",))
    record_spec(str(tmp_path), spec)
    record_spec(str(tmp_path), spec)  # same query: fine
    changed = QuerySpec(2, 60_000, 5_000, ("count(*) as n",), key_columns=("meter", "site"),
                        partition_groups=8)
    with pytest.raises(ConfigError) as info:
        check_recorded(str(tmp_path), changed)
    first, *rest = str(info.value).splitlines()
    assert first == (f"window is '1 minute' but the query in stateLocation {str(tmp_path)!r} "
                     f"was started with window '10 seconds': set window back to '10 seconds', "
                     f"or start the changed query with a new stateLocation and a new "
                     f"checkpointLocation")
    assert rest == ["also changed: keyColumns is 'meter, site', was 'meter'",
                    "also changed: partitionGroups is 8, was 16"]


SCHEMA = pa.schema([("note", pa.string()), ("ts", pa.int64()), ("v", pa.float64()),
                    ("kind", pa.string()), ("meter", pa.int64()), ("x", pa.int32())])


@pytest.mark.parametrize(("aggregates", "where", "operators", "used"), [
    (("count(*) as n",), None, (), ["ts", "meter"]),
    (("first(v) as f", "count(*) as n"), None, (), ["ts", "v", "meter"]),
    (("first_where(v, kind = 'a') as f",), None, (), ["ts", "v", "kind", "meter"]),
    (("count_where(kind = 'a') as n",), "x > 1", (), ["ts", "kind", "meter", "x"]),
    (("count(*) as n",), None, ("delta(v) as dv",), SCHEMA.names),
])
def test_a_query_uses_its_window_and_filter_columns_or_every_column_with_operators(
        aggregates: tuple[str, ...], where: str | None, operators: tuple[str, ...],
        used: list[str]) -> None:
    spec = QuerySpec(2, 10_000, 5_000, aggregates, key_columns=("meter",), where=where,
                     operators=operators)
    assert spec.used_columns(SCHEMA) == used


def test_the_sink_keeps_its_input_sequence_and_end_columns() -> None:
    config = parse_sink_options({"path": "/o", "stateLocation": "/s", "inputs": "2",
                                 "inputColumn": "x", "sequenceColumn": "note",
                                 "endOfInputColumn": "done", "keyColumns": "meter",
                                 "window": "10 seconds", "aggregates": "count(*) as n"})
    schema = SCHEMA.append(pa.field("done", pa.bool_()))
    assert config.stream_columns(schema) == ["note", "ts", "meter", "x", "done"]
    without = parse_sink_options({"path": "/o", "stateLocation": "/s", "inputs": "2",
                                  "inputColumn": "x", "keyColumns": "meter",
                                  "window": "10 seconds", "aggregates": "count(*) as n"})
    assert without.stream_columns(schema) == schema.names  # every column orders ties
