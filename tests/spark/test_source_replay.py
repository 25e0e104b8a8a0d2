"""The source through real Spark: a crash inside a planned batch, and one query per location.

A reported defect: the driver (``restart_driver.py``, its own session) is killed by the crash
point ``source.planned`` of batch 1 — right after Spark wrote ``offsets/1`` — a file that sorts
inside batch 1's range is added, and the query restarts. The replay must read the planned rows;
the new file is then reported (``lateFiles=fail``) or skipped and counted (``skip``).
Defect 6: a second query on a running query's ``stateLocation`` is refused, naming the holder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.inputs.manifest import manifest_path, read_manifest
from spark_stream_sched.testing import faults

from .helpers import run_available_now, source_options, start_query, write_inputs

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _driver(tmp_path, options: dict[str, str], name: str,
            crash: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    options_file = tmp_path / f"{name}.json"
    options_file.write_text(json.dumps(options))
    env = os.environ | {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                        "PYTHONPATH": REPO} | (crash or {})
    with open(tmp_path / f"{name}.stderr", "w", encoding="utf-8") as stderr:
        return subprocess.run(
            [sys.executable, "-m", "tests.spark.restart_driver", str(options_file),
             str(tmp_path / "ckpt"), str(tmp_path / "out")],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
            start_new_session=True, timeout=300, check=False)


def _batches(out: str) -> list[list[dict]]:
    names = sorted(n for n in os.listdir(out) if n.endswith(".parquet"))
    return [pq.read_table(os.path.join(out, n)).to_pylist() for n in names]


def _logged_offset(checkpoint: str, batch: int) -> dict:
    """Our source's offset in Spark's offset log (last line of ``offsets/<batch>``)."""
    with open(os.path.join(checkpoint, "offsets", str(batch)), encoding="utf-8") as fh:
        return json.loads(fh.read().splitlines()[-1])


def _add_file_inside(input_dir: str, cursor_file: str) -> str:
    """A file sorting just before ``cursor_file``, holding its rows with other values."""
    table = pq.read_table(cursor_file)
    table = table.set_column(table.schema.get_field_index("value"), "value",
                             pc.add(table.column("value"), 1000.0))
    stem = os.path.basename(cursor_file).removesuffix(".parquet")
    previous = f"part-{int(stem.split('-')[1]) - 1:05d}"
    late = os.path.join(input_dir, f"{previous}a.parquet")  # sorts between the two
    pq.write_table(table, late)
    return late


@pytest.mark.soak
@pytest.mark.parametrize("late_files", ["fail", "skip"])
def test_crash_after_offsets_logged_then_a_file_inside_the_batch(spark, tmp_path,
                                                                 late_files: str) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=3, rows=150)
    # the driver admits rows (splitRows=tasks: whole row groups, here whole files), so the
    # replayed batch ends inside input 0's second file
    options = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                             maxRecordsPerTrigger=100, lateFiles=late_files, splitRows="driver")
    clean = run_available_now(spark, options | {"stateLocation": str(tmp_path / "clean")},
                              str(tmp_path / "ckpt-clean"))
    clean_batches = [rows for _, rows in sorted(clean, key=lambda b: b[0])]
    crash = {faults.ENV_AT: "source.planned:batch=1", faults.ENV_PGID: "session",
             faults.ENV_ONCE: str(tmp_path / "crashed")}

    first = _driver(tmp_path, options, "first", crash)
    assert first.returncode == -signal.SIGKILL, "the driver was not killed at source.planned"
    assert first.stdout.split() == ["BATCH", "0"]
    checkpoint = str(tmp_path / "ckpt")
    assert not os.path.exists(os.path.join(checkpoint, "commits", "1"))
    start_file = _logged_offset(checkpoint, 0)["inputs"][0]["file"]
    end_file = _logged_offset(checkpoint, 1)["inputs"][0]["file"]
    assert start_file < end_file  # batch 1 spans two files of input 0
    late = _add_file_inside(str(tmp_path / "in" / "in0"), end_file)
    assert start_file < late < end_file

    second = _driver(tmp_path, options, "second", crash)
    replayed = _batches(str(tmp_path / "out"))
    if late_files == "fail":
        assert second.returncode != 0
        stderr = (tmp_path / "second.stderr").read_text()
        assert f"file {late!r} appeared after" in stderr
        assert "lateFiles=skip" in stderr
        assert replayed == clean_batches[:2]  # batch 1 replayed exactly as planned
        return
    assert second.returncode == 0, (tmp_path / "second.stderr").read_text()[-3000:]
    assert replayed == clean_batches
    entries, _ = read_manifest(manifest_path(str(tmp_path / "state"), 0))
    assert [e.file for e in entries if e.skipped] == [late]  # recorded once, never read


def test_a_second_query_on_a_running_querys_state_location_is_refused(spark,
                                                                      tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), n_inputs=2, rows=100)
    options = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"),
                             endOfInput="never")
    running, sink = None, []
    try:
        running = start_query(spark, options, str(tmp_path / "ckpt-1"), sink,
                              available_now=False)
        running.processAllAvailable()  # its driver holds the lock now
        second = start_query(spark, options, str(tmp_path / "ckpt-2"), [])
        with pytest.raises(Exception, match=r"is in use by ordered-agg source with pid \d+"):
            second.awaitTermination(120)
        assert f"stateLocation {str(tmp_path / 'state')!r}" in str(second.exception())
        assert running.isActive
    finally:
        if running is not None:
            running.stop()
    # Stopped, the location is free again: a restart on it in the same session runs (a lock
    # still held would fail it after the lock's wait, with the error above).
    again = start_query(spark, options, str(tmp_path / "ckpt-1"), sink, available_now=False)
    try:
        again.processAllAvailable()
        assert again.exception() is None
    finally:
        again.stop()
