"""Option ``scheduler``: the groups run on the threaded executor; results never change.

The reader is driven directly (no JVM) over several admission-limited micro-batches, so every
group's window state is carried from batch to batch through the executor's operators.
"""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.scheduler.strategies import strategy_names

from .helpers import (
    assert_matches_oracle,
    expected_rows,
    flatten,
    output_key,
    run_available_now,
    source_options,
    write_inputs,
)
from .test_reader import make_reader, run_batches


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):  # noqa: ANN001, ANN201
    root = tmp_path_factory.mktemp("sched")
    tables = write_inputs(str(root / "in"), rows=240)
    direct = run_batches(make_reader(source_options(str(root / "in"), 3, str(root / "direct"),
                                                    partitionGroups=6)),
                         limit=ReadMaxRows(150))
    return root, tables, direct


@pytest.mark.parametrize("strategy", strategy_names())
@pytest.mark.parametrize("workers", [1, 2])
def test_every_strategy_gives_the_direct_paths_batches(inputs, strategy: str,
                                                       workers: int) -> None:
    root, tables, direct = inputs
    state = root / f"state-{strategy}-{workers}"
    opts = source_options(str(root / "in"), 3, str(state), partitionGroups=6,
                          scheduler=strategy, workers=workers)
    batches = run_batches(make_reader(opts), limit=ReadMaxRows(150))
    assert len(batches) >= 3  # several batches: state went through the executor and back
    assert batches == direct
    rows = sorted((r for b in batches for r in b), key=output_key)
    assert_matches_oracle(rows, expected_rows(tables))


@pytest.fixture(scope="module")
def big_inputs(tmp_path_factory):  # noqa: ANN001, ANN201
    """Rows enough for several packets per group and batch (~8.7 k rows per packet)."""
    root = tmp_path_factory.mktemp("sched-big")
    tables = write_inputs(str(root / "in"), n_inputs=2, rows=12_000, files=2)
    direct = run_batches(make_reader(source_options(str(root / "in"), 2, str(root / "direct"),
                                                    partitionGroups=1)))
    return root, tables, direct


@pytest.mark.parametrize("strategy", strategy_names())
def test_every_strategy_at_default_batch_sizes(big_inputs, strategy: str) -> None:
    """A group gets several packets per micro-batch; the fixed bound closes windows once."""
    root, tables, direct = big_inputs
    opts = source_options(str(root / "in"), 2, str(root / f"state-{strategy}"),
                          partitionGroups=1, scheduler=strategy, workers=2)
    batches = run_batches(make_reader(opts))  # default admission: maxRecordsPerTrigger
    assert batches == direct
    rows = sorted((r for b in batches for r in b), key=output_key)
    assert_matches_oracle(rows, expected_rows(tables))


def test_unknown_strategy_is_refused_on_the_driver(tmp_path) -> None:
    opts = source_options(str(tmp_path), 3, str(tmp_path / "s"), scheduler="path-capacity")
    with pytest.raises(ConfigError, match="did you mean 'path_capacity'"):
        make_reader(opts)


@pytest.mark.spark
@pytest.mark.slow
def test_scheduler_option_in_a_real_spark_query(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          scheduler="path_capacity", workers=2, maxRecordsPerTrigger=250)
    batches = run_available_now(spark, opts, str(tmp_path / "ckpt"))
    assert len([b for b in batches if b[1]]) >= 2
    rows = sorted(flatten(batches), key=output_key)
    assert_matches_oracle(rows, expected_rows(tables))
