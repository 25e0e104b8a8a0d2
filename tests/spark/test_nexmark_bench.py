"""``bench nexmark``'s Spark engines end to end: the source equals the DuckDB reference and is
the same for both batchings; native Spark emits only reference rows, each once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_stream_sched.bench import nexmark

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_source_and_native_spark_on_q7_and_q11(spark: Any, tmp_path: Path) -> None:
    # 150,000 events are 15 s of event time: two q7 windows, the last left open by native Spark
    results = nexmark.run(events=150_000, engines=("source", "native"), repeat=1, seed=2,
                          workdir=str(tmp_path), show_progress=False)
    by = {(r["query"], r["engine"]): r for r in results}
    for query in ("q7", "q11"):
        reference = by[(query, "duckdb")]["rows_out"]
        source, native = by[(query, "source")], by[(query, "native")]
        assert source["matches_reference"] is True
        assert source["identical_across_batchings"] is True
        assert source["rows_out"] == reference > 0
        assert native["matches_reference"] is True
        assert native["identical_across_batchings"] is True
        assert 0 < native["rows_out"] < reference
        assert native["left_open"] == reference - native["rows_out"]
        for row in (source, native):
            assert row["cpu_s"] > row["wall_s"] * 0.2  # the Spark processes were counted
