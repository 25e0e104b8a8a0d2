"""Hostile option strings on the option doors: each is one line at definition, or runs.

The Spark source, the Spark sink and ``ordered()`` (which builds its spec with
:func:`spec_from_options`) parse the same options; each case is defined and built on the driver's
schema (as every door does before any task runs) and must fail with one short line naming the
option, or run. The CLI's flags are tested in tests/test_cli_aggregate.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.options.sink import parse_sink_options
from spark_stream_sched.options.source import parse_options
from spark_stream_sched.runtime.query import QuerySpec, spec_from_options
from spark_stream_sched.runtime.query.spec import SPEC_OPTIONS

SCHEMA = pa.schema([("ts", pa.timestamp("ms")), ("meter", pa.string()), ("value", pa.float64())])
BASE = {"window": "4s", "aggregates": "count(*) as n", "keyColumns": "meter"}
NESTED = "(" * 250 + "value > 1" + ")" * 250

DOORS: dict[str, Callable[[dict[str, str]], QuerySpec]] = {
    "source": lambda o: parse_options({**o, "inputs": "/a", "stateLocation": "/s"}).spec,
    "sink": lambda o: parse_sink_options({**o, "path": "/o", "inputs": "1",
                                          "stateLocation": "/s"}).spec,
    "ordered()": lambda o: spec_from_options({k: o[k] for k in o if k in SPEC_OPTIONS}, 1),
}

HOSTILE = {
    "nested parentheses in where": (
        {"where": NESTED},
        f"option where={'(' * 180!r}... (509 characters): the predicate nests parentheses and "
        f"'not' more than 100 levels deep"),
    "nested parentheses in count_where": (
        {"aggregates": f"count_where({NESTED}) as c"},
        "the predicate nests parentheses and 'not' more than 100 levels deep"),
    "nested not": ({"where": "not " * 8000 + "value > 1"}, "more than 100 levels deep"),
    "60,000 aggregates (a 1 MB option)": (
        {"aggregates": ", ".join(f"count(*) as n{i}" for i in range(60_000))},
        "... (1,188,888 characters): 60,000 aggregates given; at most 1,000 are supported"),
    "reserved alias": ({"aggregates": "count(*) as __input"},
                       "alias '__input' starts with '__', which is reserved"),
    "reserved operator alias": ({"operators": "delta(value) as __d"},
                                "alias '__d' starts with '__', which is reserved"),
    "aliases equal up to case": ({"aggregates": "count(*) as N, count(value) as n"},
                                 "aggregate aliases 'N' and 'n' are equal up to case"),
    "an alias equal to the key up to case": (
        {"aggregates": "count(*) as Meter"},
        "result columns 'meter' and 'Meter' are equal up to case; Spark resolves column names "
        "without case, so it could not read the results (COLUMN_ALREADY_EXISTS)"),
    "an operator alias equal to a column up to case": (
        {"operators": "delta(value) as VALUE", "window": "", "aggregates": ""},  # rows out
        "result columns 'value' and 'VALUE' are equal up to case"),
}


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_options_are_one_short_line_at_definition(door: str, case: str) -> None:
    """They used to raise RecursionError, exhaust the driver's heap, or be accepted and fail
    in every task (``__input``) or in Spark's reader (COLUMN_ALREADY_EXISTS)."""
    options, message = HOSTILE[case]
    with pytest.raises(ConfigError) as info:
        DOORS[door]({**BASE, **options}).build(SCHEMA)
    text = str(info.value)
    assert "\n" not in text
    assert message in text
    assert len(text) < 1000  # a 1 MB option is not repeated in its message


@pytest.mark.parametrize("door", sorted(DOORS))
def test_an_8000_term_and_chain_and_100_levels_of_parentheses_are_defined(door: str) -> None:
    """8,000 terms joined by ``and`` used to raise RecursionError; a chain is one level deep."""
    chain = " and ".join(f"value > {-i}" for i in range(8000))
    nested = "(" * 100 + "value > 2" + ")" * 100
    spec = DOORS[door]({**BASE, "where": f"{nested} or {chain}",
                        "aggregates": f"count_where({chain}) as c"})
    assert spec.used_columns(SCHEMA) == ["ts", "meter", "value"]
