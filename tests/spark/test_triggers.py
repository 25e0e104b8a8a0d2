"""A processing-time trigger gives the same rows as AvailableNow (admission control on)."""

from __future__ import annotations

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


def test_processing_time_trigger_matches_available_now_and_oracle(spark, tmp_path) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=250)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state-pt"),
                          endOfInput="exhausted", maxRecordsPerTrigger=200)
    sink: list[Any] = []

    def collect(df: Any, batch_id: int) -> None:
        sink.append((batch_id, [r.asDict() for r in df.collect()]))

    query = (spark.readStream.format("ordered-agg").options(**opts).load()
             .writeStream.foreachBatch(collect).trigger(processingTime="200 milliseconds")
             .option("checkpointLocation", str(tmp_path / "ckpt-pt")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert len([b for b in sink if b[1]]) >= 2  # the limit split the input over batches
    timed = flatten(sink)
    reference = flatten(run_available_now(
        spark, opts | {"stateLocation": str(tmp_path / "state-an")}, str(tmp_path / "ckpt-an")))
    assert sorted(timed, key=output_key) == sorted(reference, key=output_key)
    assert_matches_oracle(sorted(timed, key=output_key), expected_rows(tables))
