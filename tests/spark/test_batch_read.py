"""``spark.read.format("ordered-agg")``: the AvailableNow stream's rows, in one pass, no state.

Before, ``load()`` succeeded and the first action failed with ``[NOT_IMPLEMENTED] reader is not
implemented``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .helpers import (
    assert_matches_oracle,
    expected_rows,
    flatten,
    output_key,
    run_available_now,
    source_options,
    write_inputs,
)

pytestmark = pytest.mark.spark


def batch_read(spark: Any, opts: dict[str, str]) -> list[dict[str, Any]]:
    rows = spark.read.format("ordered-agg").options(**opts).load().collect()
    return sorted((r.asDict() for r in rows), key=output_key)


def tree(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("num_partitions", [pytest.param(1, marks=pytest.mark.slow), 2, 5])
def test_batch_read_equals_available_now_stream_and_oracle(spark, tmp_path,
                                                          num_partitions: int) -> None:
    root = str(tmp_path / "in")
    tables = write_inputs(root, rows=250)
    opts = source_options(root, 3, str(tmp_path / "state"), numPartitions=num_partitions,
                          maxRecordsPerTrigger=300)
    before = tree(str(tmp_path))
    batch = batch_read(spark, {k: v for k, v in opts.items() if k != "stateLocation"})
    assert tree(str(tmp_path)) == before  # nothing written: the state lived in memory
    stream = sorted(flatten(run_available_now(spark, opts, str(tmp_path / "ckpt"))),
                    key=output_key)
    assert batch == stream
    assert_matches_oracle(batch, expected_rows(tables))


def test_batch_read_ignores_and_leaves_state_location_alone(spark, tmp_path) -> None:
    root = str(tmp_path / "in")
    tables = write_inputs(root, n_inputs=2, rows=120, ts_type="timestamp")
    state = tmp_path / "state"
    rows = batch_read(spark, source_options(root, 2, str(state), endOfInput="never"))
    assert not state.exists()
    assert len(rows) == len(expected_rows(tables))


def test_batch_read_of_an_empty_input_counts_it_finished(spark, tmp_path) -> None:
    root = str(tmp_path / "in")
    tables = write_inputs(root, n_inputs=2, rows=120)
    os.makedirs(os.path.join(root, "in2"))
    opts = source_options(root, 3, str(tmp_path / "state"))
    assert_matches_oracle(batch_read(spark, opts), expected_rows(tables))


def test_batch_read_option_error_fails_at_load_with_one_line(spark, tmp_path) -> None:
    root = str(tmp_path / "in")
    write_inputs(root, n_inputs=1, rows=50)
    opts = source_options(root, 1, str(tmp_path / "state"), numPartitons="3")
    with pytest.raises(Exception, match="did you mean 'numPartitions'") as info:
        spark.read.format("ordered-agg").options(**opts).load()
    assert "ConfigError: unknown option 'numpartitons'" in str(info.value).splitlines()[0]



@pytest.mark.parametrize(("aggregates", "first_line"), [
    ("count(*) as Meter", "ConfigError: result columns 'meter' and 'Meter' are equal up to case; "
                          "Spark resolves column names without case"),
    ("count(*) as __input", "ConfigError: option aggregates='count(*) as __input': aggregate "
                            "'count(*) as __input': alias '__input' starts with '__', which is "
                            "reserved"),
])
def test_an_alias_spark_could_not_read_back_fails_at_load_with_one_line(
        spark, tmp_path, aggregates: str, first_line: str) -> None:
    """Such aliases used to be written (Spark's reader then failed: COLUMN_ALREADY_EXISTS) or
    accepted and fail in every task (``__input``)."""
    root = str(tmp_path / "in")
    write_inputs(root, n_inputs=1, rows=50)
    opts = source_options(root, 1, str(tmp_path / "state"), aggregates=aggregates)
    with pytest.raises(Exception, match="ConfigError") as info:
        spark.read.format("ordered-agg").options(**opts).load()
    assert first_line in str(info.value).splitlines()[0]
