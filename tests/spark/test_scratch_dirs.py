"""Where the processes the tests start keep their temporary files: under the run's basetemp."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..spark_scratch import scratch_env


def test_scratch_env_points_every_temporary_directory_under_local(tmp_path: Path) -> None:
    env = scratch_env(tmp_path, {"SPARK_SUBMIT_OPTS": "-Da=b"})
    assert env == {"SPARK_LOCAL_DIRS": str(tmp_path), "TMPDIR": str(tmp_path / "tmp"),
                   "SPARK_SUBMIT_OPTS": f"-Da=b -Djava.io.tmpdir={tmp_path / 'tmp'}"}
    assert (tmp_path / "tmp").is_dir()
    daemon = scratch_env(tmp_path, {}, daemon=True)
    assert daemon["JAVA_TOOL_OPTIONS"] == f"-Djava.io.tmpdir={tmp_path / 'tmp'}"


def worker_tempdir(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import tempfile

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"tmp": [tempfile.gettempdir()]})


def test_a_python_worker_keeps_its_temporary_files_in_the_runs_directory(
        spark: Any, spark_scratch_in_the_runs_temporary_directory: Path) -> None:
    # a worker a fault test kills leaves its join's spill directory in its temp directory
    seen = {r["tmp"] for r in spark.range(2).mapInArrow(worker_tempdir, "tmp string").collect()}
    assert seen == {str(spark_scratch_in_the_runs_temporary_directory / "tmp")}
