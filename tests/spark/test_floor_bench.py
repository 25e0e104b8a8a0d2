"""``bench spark``'s floors: the same micro-batches as the source, its output or nothing."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from spark_stream_sched.bench import spark_bench
from spark_stream_sched.bench.spark_floor_sources import part_path, precompute_results

from .helpers import source_options, write_inputs


def test_precomputed_results_are_the_sources_batches(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"))
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=250, numPartitions=2)
    batches, partitions = precompute_results(opts, str(tmp_path / "rows"))
    total_rows = sum(37 * j + 300 for j in range(3))
    assert batches == -(-total_rows // 250)
    assert partitions == 2
    written = [pa.ipc.open_file(part_path(str(tmp_path / "rows"), b, p)).read_all()
               for b in range(batches) for p in range(partitions)]
    assert sum(t.num_rows for t in written) > 0
    assert not os.path.exists(part_path(str(tmp_path / "rows"), batches, 0))


@pytest.mark.slow
@pytest.mark.bench
def test_bench_runs_the_source_and_both_floors_with_the_same_batches(spark, tmp_path) -> None:
    results = spark_bench.run(rows=20_000, n_inputs=2, keys=50, runs=1, batchings=(8, 4),
                               workdir=str(tmp_path), master="local[2]", show_progress=False,
                               engines=("ordered-agg", "floor-precomputed", "floor-empty"),
                               long_rows=20_000, cores=(), warmup=0)
    by = {(r["case"], r["engine"]): r for r in results}
    assert set(by) == {(c, e) for c in ("main", "long")
                       for e in ("ordered-agg", "floor-precomputed", "floor-empty")}
    for case in ("main", "long"):
        source, floor = by[(case, "ordered-agg")], by[(case, "floor-precomputed")]
        assert source["matches_truth"] is True
        assert floor["matches_truth"] is True
        assert source["micro_batches"] == floor["micro_batches"] == \
            by[(case, "floor-empty")]["micro_batches"]
        assert by[(case, "floor-empty")]["windows_emitted"] == 0
        assert by[(case, "floor-empty")]["matches_truth"] is None  # nothing to compare
        assert floor["x_floor"] == 1.0
        assert source["x_floor"] == round(source["seconds_median"] / floor["seconds_median"], 2)
    assert by[("main", "ordered-agg")]["micro_batches"] == 2  # 8 of 16 files per batch
    assert by[("long", "ordered-agg")]["micro_batches"] == 1  # default AvailableNow sizing


@pytest.mark.slow
@pytest.mark.bench
def test_the_stateful_floors_read_every_row_of_the_same_packed_input(spark, tmp_path) -> None:
    """floor-tws and Spark's other two stateful Python operators, side by side, doing nothing."""
    engines = ("floor-tws", "floor-apply-in-pandas-with-state", "floor-tws-row")
    results = spark_bench.run(rows=4_000, n_inputs=2, keys=20, runs=1, batchings=(16, 8),
                               workdir=str(tmp_path), master="local[2]", show_progress=False,
                               engines=engines, long_rows=0, cores=(), warmup=0)
    by = {r["engine"]: r for r in results}
    assert list(by) == list(engines)
    for engine in engines:
        assert by[engine]["rows_read"] == [4_000], engine
        assert by[engine]["windows_emitted"] == 0, engine
        assert by[engine]["matches_truth"] is None, engine
        assert by[engine]["cpu_tasks_s"] > 0, engine  # the rows reached Python
