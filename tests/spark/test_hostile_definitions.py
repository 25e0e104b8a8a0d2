"""Hostile and careless query definitions, through every door: a result, or one clear line.

Each attack is one :class:`~tests.spark.hostile.Query`, run through the CLI, the source (batch
read), the sink and ``ordered()`` over the same two small inputs. An attack the doors must
refuse names what is wrong on the first line the user sees (the CLI's ``error:`` line, Spark's
exception's first line), with the plugin's error class, before any data is read or written;
an attack that must work gives the source's and the sink's rows equal to the CLI's (``make
test-slow``, as the size attack on memory in ``tests/test_hostile_sizes.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_stream_sched.spark import register

from .hostile import DOORS, Query, Refused, run, write_inputs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("hostile-inputs")
    tables = [pa.table({"ts": pa.array([(2 * i + j) * 1000 for i in range(20)], pa.int64()),
                        "meter": pa.array([i % 3 for i in range(20)], pa.int64()),
                        "value": pa.array([float(i - 5) for i in range(20)])})
              for j in range(2)]
    return write_inputs(root, tables)


def nested(depth: int) -> str:
    return "(" * depth + "value > 0" + ")" * depth


#: attack -> (query, what the first line must hold)
REFUSED: dict[str, tuple[Query, str]] = {
    "250 nested parentheses": (
        Query([f"count_where({nested(250)}) as c"]),
        "the predicate nests parentheses and 'not' more than 100 levels deep"),
    "60,000 aggregates (a 1 MB option)": (
        Query([f"count(*) as n{i}" for i in range(60_000)]),
        "60,000 aggregates given; at most 1,000 are supported per query"),
    "an alias of the runtime's own columns": (
        Query(["count(*) as __input"]),
        "alias '__input' starts with '__', which is reserved"),
    "aliases equal up to case": (
        Query(["count(*) as N", "sum(value) as n"]),
        "'N' and 'n' are equal up to case"),
    "an alias equal to a key up to case": (
        Query(["count(*) as Meter"]),
        "'meter' and 'Meter' are equal up to case"),
    "a row in 86,400,000 windows": (
        Query(["count(*) as n"], window="1 day", slide="1 millisecond"),
        "puts every row in 86,400,000 windows"),
    "an unknown function": (
        Query(["median(value) as m"]), "unknown function 'median'"),
}


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("attack", list(REFUSED))
def test_a_hostile_definition_is_refused_on_one_line(
        spark: Any, tmp_path: Path, inputs: list[str], attack: str, door: str) -> None:
    register(spark)
    query, message = REFUSED[attack]
    with pytest.raises(Refused) as refused:
        run(door, spark, tmp_path, inputs, query)
    line = str(refused.value)
    assert message in line, line
    assert "error" in line.split(message)[0].lower(), line  # named as an error, first
    assert len(line) < 1000, line  # a 1 MB option is not echoed back
    assert not list(tmp_path.glob("sink-out/*.parquet"))  # nothing written


#: attack -> a query every door must run (result = the CLI's)
WORKS: dict[str, Query] = {
    "an 8,000-term and chain": Query(
        ["count_where(" + " and ".join(["value > -3"] * 8_000) + ") as c", "count(*) as n"]),
    "100 nested parentheses (the limit)": Query([f"count_where({nested(100)}) as c"]),
    "1,000 aggregates (the limit)": Query([f"count(*) as n{i}" for i in range(1_000)],
                                          window="20 seconds"),
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(WORKS))
def test_a_large_definition_within_the_limits_runs_the_same_on_every_door(
        spark: Any, tmp_path: Path, inputs: list[str], attack: str) -> None:
    """The sink with its finish; ``ordered()`` has no end of input here, so it is left out."""
    register(spark)
    query = WORKS[attack]
    want = run("cli", spark, tmp_path / "cli", inputs, query)
    assert want, "the CLI wrote windows"
    for door in ("source", "sink"):
        assert run(door, spark, tmp_path / door, inputs, query) == want, door
