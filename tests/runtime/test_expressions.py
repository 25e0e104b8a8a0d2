"""Aggregate and predicate parsing, typing and error messages; Spark SQL null semantics."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError, ExpressionError
from spark_stream_sched.runtime.aggregates import bind, parse_aggregates, split_top_level
from spark_stream_sched.runtime.predicate import Predicate
from spark_stream_sched.runtime.window.spec import WindowSpec, parse_duration

SCHEMA = pa.schema([("v", pa.float64()), ("n", pa.int32()), ("s", pa.string()),
                    ("b", pa.bool_())])
TABLE = pa.table({"v": [1.0, None, 3.0], "n": [1, 2, None], "s": ["a@b.c", None, "1.2.3.4"],
                  "b": [True, None, False]}, schema=SCHEMA)


def test_aggregate_list_splits_only_at_top_level_commas() -> None:
    text = "count(*) as n, first_where(v, s rlike '[a,b]' and v > 1) as f, avg(v)"
    specs = parse_aggregates(text)
    assert [s.alias for s in specs] == ["n", "f", "avg(v)"]
    assert specs[1].predicate == "s rlike '[a,b]' and v > 1"
    assert split_top_level("a(1, 2), b") == ["a(1, 2)", "b"]


@pytest.mark.parametrize(("text", "message"), [
    ("median(v) as m", "unknown function 'median'"),
    ("count(*) as", "expected 'as alias'"),
    ("first_where(v) as f", "needs \\(column, predicate\\)"),
    ("sum(*) as s", "needs a column name"),
    ("count(*) as n, count(v) as n", "used twice"),
])
def test_bad_aggregates_are_named(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        parse_aggregates(text)


def test_binding_checks_columns_and_types() -> None:
    with pytest.raises(ExpressionError, match="unknown column 'x'"):
        bind(parse_aggregates("first(x) as f")[0], SCHEMA)
    with pytest.raises(ExpressionError, match="numeric column"):
        bind(parse_aggregates("sum(s) as f")[0], SCHEMA)
    assert bind(parse_aggregates("sum(n) as t")[0], SCHEMA).output_type == pa.int64()
    assert bind(parse_aggregates("avg(n) as t")[0], SCHEMA).output_type == pa.float64()
    assert bind(parse_aggregates("first(n) as t")[0], SCHEMA).output_type == pa.int32()


@pytest.mark.parametrize(("text", "expected"), [
    ("v > 1", [False, False, True]),              # null > 1 is null -> false
    ("not (v > 1)", [True, False, False]),          # not null is null -> false
    ("v > 1 or n = 2", [False, True, True]),
    ("v is null", [False, True, False]),
    ("s is not null and n is null", [False, False, True]),
    ("s contains '@'", [True, False, False]),
    ("s not rlike '^[0-9.]+$'", [True, False, False]),
    ("b", [True, False, False]),
    ("b = true or s = 'x'", [True, False, False]),
    ("`v` >= 3.0", [False, False, True]),
])
def test_predicates_follow_spark_null_semantics_in_both_evaluators(text, expected) -> None:
    predicate = Predicate.compile(text, SCHEMA)
    assert predicate.evaluate(TABLE).tolist() == expected
    assert [predicate.evaluate_row(r) for r in TABLE.to_pylist()] == expected


@pytest.mark.parametrize(("text", "message"), [
    ("v >", "expected a column name or a literal"),
    ("v > 1 and", "expected a column name"),
    ("(v > 1", "expected '\\)'"),
    ("x = 1", "unknown column 'x'"),
    ("s = 1", "compares a string with a number"),
    ("s rlike '('", "bad regular expression"),
    ("v contains 'a'", "needs a string column"),
    ("v", "not boolean"),
    ("v > 1 ; drop", "cannot parse"),
    ("__import__('os')", "expected 'and', 'or' or the end"),
])
def test_bad_predicates_are_rejected_without_eval(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        Predicate.compile(text, SCHEMA)


def test_durations_and_window_specs() -> None:
    assert parse_duration("30s") == 30_000
    assert parse_duration("30 seconds") == 30_000
    assert parse_duration("2 minutes") == 120_000
    assert parse_duration(250) == 250
    assert WindowSpec.parse("30s", "3s").pane_ms == 3000
    assert WindowSpec.parse("10s", "4s").pane_ms == 2000
    assert WindowSpec.parse("10s").slide_ms == 10_000
    with pytest.raises(ConfigError, match="not a duration"):
        parse_duration("30 parsecs")
    with pytest.raises(ConfigError, match="must not exceed"):
        WindowSpec.parse("3s", "30s")
    #  ts = 7000, W = 10 s, S = 4 s:  windows [0,10000) and [4000,14000)
    assert list(WindowSpec(10_000, 4_000).windows_of(7000)) == [0, 1]
    assert list(WindowSpec(10_000, 4_000).windows_of(-1)) == [-2, -1]


@pytest.mark.parametrize("pattern", [r"(a)\\1", r"(?=a)b", r"(?<!x)y"])
def test_rlike_patterns_re2_cannot_run_fail_when_parsed(pattern: str) -> None:
    """RE2 (the engine rlike runs on) has no back-references or look-arounds: refused when the
    aggregate is parsed (no schema needed), naming the pattern and RE2's reason."""
    text = f"count_where(s rlike '{pattern}') as n"
    refused = r"bad regular expression .*RE2, the engine rlike runs on, refuses it \(Invalid"
    with pytest.raises(ExpressionError, match=refused) as info:
        parse_aggregates([text])
    assert repr(pattern.replace("\\\\", "\\")) in str(info.value)  # the pattern as compiled
    with pytest.raises(ExpressionError, match=r"RE2 has no back-references"):
        Predicate.compile(f"s rlike '{pattern}'", SCHEMA)
