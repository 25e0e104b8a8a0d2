"""Pipelines in the query definition: parsing, validation, fingerprints, every surface."""

from __future__ import annotations

import argparse
import re

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.jobs.config import QueryConfig
from spark_stream_sched.runtime.keyed.pipeline import Pipeline, parse_stages
from spark_stream_sched.runtime.keyed.stage import parse_stage
from spark_stream_sched.runtime.query import QuerySpec, spec_from_options

SCHEMA = pa.schema([("ts", pa.int64()), ("meter", pa.string()), ("value", pa.float64())])


def test_stage_text_is_canonical() -> None:
    assert parse_stage("DELTA( value )  AS used").text() == "delta(value) as used"
    assert parse_stage("dedup(value, within = '10 minutes')").text() == \
        "dedup(value, within=10 minutes)"
    stage = parse_stage("lag(value, 2)")
    assert (stage.name, stage.args, stage.alias) == ("lag", ("value", "2"), None)


@pytest.mark.parametrize(("text", "message"), [
    ("delta value", "is not of the form"),
    ("detla(value)", "did you mean 'delta'"),
    ("dedup(within=1s, value)", "positional argument 'value' after a keyword"),
    ("lag(value,, 2)", "empty argument"),
])
def test_malformed_stage_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_stage(text)


def test_a_closing_operator_must_be_last() -> None:
    with pytest.raises(ConfigError, match="must be the last operator"):
        parse_stages(["sessionize(5 minutes)", "delta(value)"])


def test_spark_options_toml_and_cli_give_equal_specs() -> None:
    from spark_stream_sched.commands.aggregate import query_spec

    opts = {"keyColumns": "meter", "window": "30 seconds", "slide": "3 seconds",
            "aggregates": "sum(used) as used", "operators": "delta(value) as used; where(used > 0)"}
    from_options = spec_from_options(opts, 2)
    from_toml = QueryConfig(key_columns=("meter",), window="30 seconds", slide="3 seconds",
                            aggregates=("sum(used) as used",),
                            operators=("delta(value) as used", "where(used > 0)")).spec(2)
    args = argparse.Namespace(input=["a", "b"], window="30s", slide="3s",
                              agg=["sum(used) as used"], timestamp="ts", key=["meter"],
                              out_of_order="fail", where=None,
                              op=["DELTA(value) as used", "where(used > 0)"])
    from_cli = query_spec(args)
    assert from_options == from_toml == from_cli
    assert from_options.fingerprint() == from_cli.fingerprint()
    assert from_options.operators == ("delta(value) as used", "where(used > 0)")


def test_queries_without_operators_keep_their_fingerprint() -> None:
    spec = QuerySpec(n_inputs=2, window_ms=10_000, slide_ms=10_000, aggregates=("count(*)",))
    assert "operators" not in spec.to_json()
    assert spec.fingerprint() == "c5fb3d2ae29f2674"  # what the release before operators gave
    with_ops = QuerySpec(n_inputs=2, window_ms=10_000, slide_ms=10_000,
                         aggregates=("count(*)",), operators=("delta(value)",))
    assert with_ops.fingerprint() != spec.fingerprint()


@pytest.mark.parametrize(("opts", "message"), [
    ({"operators": "delta(value)", "aggregates": "count(*)"}, "nothing aggregates"),
    ({"operators": "sessionize(5 minutes)"}, "needs aggregates"),
    ({"aggregates": "count(*)"}, "option window is required"),
    ({"operators": "sessionize(5 minutes)", "window": "10s", "aggregates": "count(*)"},
     "closes sessions itself"),
])
def test_pipeline_shapes_that_cannot_run_are_refused(opts: dict[str, str], message: str) -> None:
    def build() -> None:
        spec_from_options({"keyColumns": "meter", **opts}, 1).build(SCHEMA)

    with pytest.raises(ConfigError, match=message):
        build()


def test_row_pipeline_builds_and_has_the_rows_schema() -> None:
    spec = spec_from_options({"keyColumns": "meter", "operators": "delta(value) as used"}, 1)
    assert spec.window is None
    query = spec.build(SCHEMA)
    assert query.output_schema.names == ["ts", "meter", "value", "used"]
    group = spec.build_group(SCHEMA)
    assert isinstance(group, Pipeline)
    assert group.emits_rows


@pytest.mark.parametrize(("n_inputs", "operators"), [
    (2, ("join(3)",)),
    (2, ("delta(value) as d", "join(3, within=10 seconds)")),
    (1, ("join(2)",)),
])
def test_a_join_of_more_inputs_than_the_query_has_is_refused_at_definition(
        n_inputs: int, operators: tuple[str, ...]) -> None:
    join = next(op for op in operators if op.startswith("join"))
    message = (rf"operator '{re.escape(parse_stage(join).text())}': joins {join[5]} inputs "
               rf".*the query has {n_inputs} input")
    with pytest.raises(ConfigError, match=message):
        QuerySpec(n_inputs, 0, 0, (), key_columns=("meter",), operators=operators)
    with pytest.raises(ConfigError, match=message):  # the Spark source's and sink's door
        spec_from_options({"keyColumns": "meter", "operators": "; ".join(operators)}, n_inputs)


def test_a_join_of_every_input_is_accepted() -> None:
    spec = QuerySpec(3, 0, 0, (), key_columns=("meter",), operators=("join(3, within=1s)",))
    assert spec.operators == ("join(3, within=1s)",)
