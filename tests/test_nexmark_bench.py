"""``bench nexmark``: its DuckDB references agree with the pandas ones, its checks can fail.

The references of ``bench nexmark`` (DuckDB SQL) and of the query tests (pandas,
``tests/test_nexmark_queries.py``) are written independently from the same definitions; here they
must give the same rows on generated bids with ties and many sessions. The runtime engine runs
end to end on a small size, and a wrong output is reported as such, not as a match. The Spark
engines' run is ``tests/spark/test_nexmark_bench.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.bench import nexmark
from spark_stream_sched.cli import main
from spark_stream_sched.data.nexmark import NexmarkConfig, write_nexmark
from spark_stream_sched.errors import ConfigError
from tests.test_nexmark_queries import q7_reference, q11_reference


def _tuples(frame: object, columns: tuple[str, ...]) -> list[tuple[object, ...]]:
    return sorted(tuple(int(v) for v in row)
                  for row in frame[list(columns)].itertuples(index=False))  # type: ignore[index]


def test_duckdb_references_equal_the_pandas_references(tmp_path: Path) -> None:
    config = NexmarkConfig(seed=5, inter_event_us=2_000, avg_bid_bytes=0)  # 500 events/s
    write_nexmark(tmp_path / "nx", 30_000, config, rows_per_file=4_001)
    bids = tmp_path / "nx" / "bid"
    # two bids (of the first 2 s) tie above every other price of the first window
    path = sorted(bids.glob("*.parquet"))[0]
    first = pq.read_table(path)
    prices = first.column("price").to_numpy().copy()
    prices[[500, 900]] = pq.read_table(bids).column("price").to_numpy().max() + 1
    pq.write_table(first.set_column(first.schema.get_field_index("price"), "price",
                                    pa.array(prices)), path)
    q7 = nexmark.reference_rows("q7", bids)
    assert len(q7) == 6
    assert q7[0][-1] == first.column("event_id")[500].as_py()  # the earlier of the two
    assert q7 == _tuples(q7_reference(bids), nexmark.QUERIES["q7"].columns)
    q11 = nexmark.reference_rows("q11", bids)
    assert len(q11) > 100
    assert q11 == _tuples(q11_reference(bids), nexmark.QUERIES["q11"].columns)


def test_the_runtime_engine_matches_and_is_identical_across_batchings(tmp_path: Path) -> None:
    results = nexmark.run(events=60_000, engines=("runtime",), repeat=1, seed=3,
                          workdir=str(tmp_path), show_progress=False)
    runs = [r for r in results if r["engine"] == "runtime"]
    assert [r["query"] for r in runs] == ["q7", "q11"]
    for row in runs:
        assert row["matches_reference"] is True
        assert row["identical_across_batchings"] is True
        assert row["rows_out"] > 0
        assert row["events_per_cpu_s"] > 0
    references = {r["query"]: r["rows_out"] for r in results if r["engine"] == "duckdb"}
    assert references == {r["query"]: r["rows_out"] for r in runs}
    assert "= reference" in nexmark.format_results(results)


def test_a_wrong_output_is_reported_as_a_mismatch() -> None:
    reference = [(0, 10_000, 5, 1, 2, 3), (10_000, 20_000, 7, 1, 2, 9)]
    wrong = [reference[0], (10_000, 20_000, 7, 1, 2, 8)]
    assert nexmark._verdict("runtime", [reference, wrong], reference) == {
        "matches_reference": False, "identical_across_batchings": False, "left_open": 0}
    # native: a duplicate emission, or a row that is no reference row, is a mismatch
    assert nexmark._verdict("native", [reference[:1]] * 2, reference)["matches_reference"]
    assert not nexmark._verdict("native", [reference[:1] * 2] * 2,
                                reference)["matches_reference"]
    assert not nexmark._verdict("native", [wrong] * 2, reference)["matches_reference"]


def test_unknown_queries_and_engines_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown query or engine q99, spark"):
        nexmark.run(events=10, queries=["q99"], engines=["spark"], show_progress=False)


def test_the_command_writes_one_json_object_per_query_and_engine(tmp_path: Path) -> None:
    out = tmp_path / "nexmark.json"
    assert main(["bench", "nexmark", "--events", "20000", "--engines", "runtime", "--repeat", "1",
                 "--no-progress", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["query"], r["engine"]) for r in rows] == [
        ("generate", "generator"), ("q7", "duckdb"), ("q7", "runtime"), ("q11", "duckdb"),
        ("q11", "runtime")]
    for row in rows:
        assert {"query", "engine", "events", "events_per_cpu_s", "matches_reference",
                "identical_across_batchings"} <= set(row)
        assert row["events"] == 20_000
