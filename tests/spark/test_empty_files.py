"""An empty input file is 0 rows for the Spark source too, as for the CLI.

``write_input`` of 2 JSON-lines rows into 3 files leaves one file empty; the source used to fail
with ``InputError: Empty JSON file`` while the CLI read 2 rows. Driven without a JVM.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_stream_sched.cli import main
from spark_stream_sched.inputs import read_input, write_input

from .test_reader import make_reader, run_batches

ROWS = pa.table({"ts": pa.array([100, 2_500], pa.int64()), "meter": [1, 1], "value": [0.5, 1.0]})


@pytest.mark.parametrize(("fmt", "option"), [("jsonl", "json"), ("jsonl", "jsonl"),
                                             ("csv", "csv"), ("parquet", "parquet")])
def test_source_and_cli_read_the_same_rows_with_an_empty_file(tmp_path: Path, fmt: str,
                                                               option: str) -> None:
    files = write_input(ROWS, tmp_path / "in", fmt, n_files=3)
    assert sum(f.stat().st_size == 0 for f in files) == (1 if fmt == "jsonl" else 0)
    opts = {"inputs": str(tmp_path / "in"), "format": option, "window": "1 second",
            "keyColumns": "meter", "aggregates": "count(*) as n, sum(value) as total",
            "stateLocation": str(tmp_path / "state"), "endOfInput": "availableNow"}
    batches = run_batches(make_reader(opts), limit=ReadAllAvailable())
    source_rows = [r for batch in batches for r in batch]

    out = tmp_path / "cli.parquet"
    assert main(["aggregate", "--input", str(tmp_path / "in"), "--format", option, "--key",
                 "meter", "--window", "1s", "--agg", "count(*) as n",
                 "--agg", "sum(value) as total", "--out", str(out)]) == 0
    expected = [{"window_start": 0, "window_end": 1000, "meter": 1, "n": 1, "total": 0.5},
                {"window_start": 2000, "window_end": 3000, "meter": 1, "n": 1, "total": 1.0}]
    assert source_rows == expected
    assert read_input(out).to_pylist() == expected
