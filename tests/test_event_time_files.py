"""Extreme event times in real files (a reported defect): errors name input, file and row.

Covers the three ways files enter, all through the input layer: the Spark source's cursor reads
(:mod:`spark_stream_sched.inputs.cursors`, pure, no JVM), the static snapshot
:func:`~spark_stream_sched.inputs.read_input` and the standalone ``spark-stream-sched aggregate``
command.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched import inputs
from spark_stream_sched.errors import InputError
from spark_stream_sched.inputs import Cursor, InputStream, read_input
from spark_stream_sched.runtime.packets import TS_MAX

MS = 1_700_000_000_000
SCHEMA = pa.schema([("ts", pa.int64()), ("meter", pa.int64()), ("value", pa.float64())])
MICROS = (MS + 30) * 1000
BAD = {"microseconds": (MICROS, r"event time 1700000000030000 ms .*looks like microseconds"),
       "int64 max": (TS_MAX, r"event time 9223372036854775807 ms .*sentinel")}


def _write_input(directory: Path, bad_ts: int) -> list[str]:
    """Two files of 3 rows; row 1 of the second file (position 4) holds ``bad_ts``."""
    directory.mkdir(parents=True)
    files = []
    for n, ts in enumerate([[MS, MS + 10, MS + 20], [MS + 30, bad_ts, MS + 40]]):
        path = directory / f"part-{n:05d}.parquet"
        pq.write_table(pa.table({"ts": ts, "meter": [1, 2, 3], "value": [1.0, 2.0, 3.0]},
                                schema=SCHEMA), path)
        files.append(str(path))
    return files


@pytest.mark.parametrize("bad", sorted(BAD))
def test_source_reads_name_input_file_and_row(tmp_path: Path, bad: str) -> None:
    bad_ts, message = BAD[bad]
    files = _write_input(tmp_path / "in", bad_ts)
    stream = InputStream(3, str(tmp_path / "in"), "parquet", SCHEMA)
    where = rf"^input 3 file '{files[1]}': event time {bad_ts} ms in column 'ts' at row 1 "
    for policy in ("fail", "drop"):  # out-of-range rows fail whatever the out-of-order policy
        with pytest.raises(InputError, match=where):
            inputs.read_between(stream, files, Cursor(), Cursor(seq=6), "ts", policy)
        with pytest.raises(InputError, match=where):
            inputs.advance(stream, files, Cursor(), 6, "ts", policy, False)
    with pytest.raises(InputError, match=message):
        inputs.peek_event_times(stream, files, Cursor(), 6, "ts")
    # the rows before the bad one still read
    _, ts, _ = inputs.read_between(stream, files, Cursor(), Cursor(files[1], 1, 4), "ts",
                                   "fail")
    assert ts.tolist() == [MS, MS + 10, MS + 20, MS + 30]


def test_read_input_checks_event_times_file_by_file(tmp_path: Path) -> None:
    files = _write_input(tmp_path / "in", MICROS)
    assert read_input(tmp_path / "in").num_rows == 6  # no ts column named: no check
    with pytest.raises(InputError, match=rf"^file {files[1]}: event time {MICROS} ms in column "
                                         r"'ts' at row 1 is outside the supported range"):
        read_input(tmp_path / "in", ts_column="ts")


@pytest.mark.parametrize("bad", sorted(BAD))
def test_aggregate_command_names_input_file_and_row(tmp_path: Path, bad: str) -> None:
    bad_ts, message = BAD[bad]
    good = _write_input(tmp_path / "good", MS + 50)
    files = _write_input(tmp_path / "bad", bad_ts)
    proc = subprocess.run(
        [sys.executable, "-m", "spark_stream_sched.cli", "aggregate",
         "--input", str(Path(good[0]).parent), "--input", str(tmp_path / "bad"),
         "--window", "1s", "--agg", "count(*) as n", "--out", str(tmp_path / "o.parquet")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"input 1 ({tmp_path / 'bad'}): file {files[1]}: " in proc.stderr
    assert "at row 1 is outside the supported range" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert re.search(message, proc.stderr)
