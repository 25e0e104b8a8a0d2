"""Input shapes real writers leave, through the source (driven without a JVM) and the CLI.

Each test is an issue-43 reproduction: a writer's ``_temporary/`` copy under a glob, a directory
named like a glob, a glob that matches nothing, a zero-byte file filled late, a half-written
Parquet file completed or replaced after the query failed on it. No row may be lost silently:
each shape is read, or fails naming the file and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spark_stream_sched.cli import main
from spark_stream_sched.errors import InputError
from spark_stream_sched.spark.datasource import OrderedAggDataSource

from .test_reader import make_reader, run_batches


def rows(start: int, n: int) -> pa.Table:
    """``n`` rows one second apart from second ``start``, one meter."""
    return pa.table({"ts": pa.array([(start + i) * 1000 for i in range(n)], pa.int64()),
                     "meter": pa.array([1] * n, pa.int64()),
                     "value": pa.array([1.0] * n)})


def options(inputs: str, state: Path, **extra: Any) -> dict[str, str]:
    opts = {"inputs": inputs, "window": "1 hour", "keyColumns": "meter",
            "aggregates": "count(*) as n", "stateLocation": str(state),
            "endOfInput": "availableNow"}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def counted(batches: list[list[dict[str, Any]]]) -> int:
    return sum(r["n"] for batch in batches for r in batch)


def cli_count(tmp_path: Path, *inputs: str) -> int:
    out = tmp_path / "cli.parquet"
    flags = [x for path in inputs for x in ("--input", path)]
    assert main(["aggregate", *flags, "--key", "meter", "--window", "1h", "--agg",
                 "count(*) as n", "--out", str(out)]) == 0
    return sum(pq.read_table(out).column("n").to_pylist())


# -- the listing rule through the doors -----------------------------------------------------


def test_a_glob_does_not_read_a_writers_temporary_copy(tmp_path: Path) -> None:
    for start, rel in enumerate(("a/part-0.parquet", "b/part-0.parquet",
                                 "_temporary/part-0.parquet")):
        (tmp_path / "in" / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows(10 * start, 10), tmp_path / "in" / rel)
    pattern = str(tmp_path / "in" / "*" / "part-*.parquet")
    reader = make_reader(options(pattern, tmp_path / "state"))
    assert counted(run_batches(reader, limit=ReadAllAvailable())) == 20
    assert cli_count(tmp_path, pattern) == 20


def test_a_directory_named_like_a_glob_is_read(tmp_path: Path) -> None:
    for name in ("meter[1]", "meter2"):
        (tmp_path / name).mkdir()
        pq.write_table(rows(0, 10), tmp_path / name / "part-0.parquet")
    paths = (str(tmp_path / "meter[1]"), str(tmp_path / "meter2"))
    reader = make_reader(options(",".join(paths), tmp_path / "state"))
    assert counted(run_batches(reader, limit=ReadAllAvailable())) == 20
    assert cli_count(tmp_path, *paths) == 20


def test_a_glob_matching_nothing_fails_where_the_input_is_finished(tmp_path: Path,
                                                                   capsys) -> None:
    (tmp_path / "a").mkdir()
    pq.write_table(rows(0, 10), tmp_path / "a" / "part-0.parquet")
    empty = str(tmp_path / "b" / "part-*.parquet")
    inputs = f"{tmp_path / 'a'},{empty}"
    with pytest.raises(InputError, match=r"^input glob '.*part-\*\.parquet' matches no file, "
                                         r"and endOfInput=availableNow would count input 1"):
        run_batches(make_reader(options(inputs, tmp_path / "state")))
    batch = OrderedAggDataSource(options(inputs, tmp_path / "unused"))
    with pytest.raises(InputError, match=r"^input glob .* matches no file, and a batch read"):
        batch.reader(batch.schema()).partitions()
    code = main(["aggregate", "--input", str(tmp_path / "a"), "--input", empty, "--key",
                 "meter", "--window", "1h", "--agg", "count(*) as n", "--out",
                 str(tmp_path / "o.parquet")])
    assert code == 2
    assert capsys.readouterr().err.startswith(
        f"spark-stream-sched aggregate: error: input glob {empty!r} matches no file")
    # a stream that may still receive files waits for them, as before
    reader = make_reader(options(inputs, tmp_path / "state2", endOfInput="never"))
    assert counted(run_batches(reader, available_now=False)) == 0  # no window closed yet
