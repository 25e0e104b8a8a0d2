"""Every door on the installed pyspark line gives the oracle's rows (so every line's rows agree).

``make test-compat`` runs this module once per supported pyspark line, each in its own virtual
environment; ``make test`` runs it on the newest. Small data: three inputs of a few hundred
rows in Parquet files, one windowed query with ``first`` and ``last``. Every door -- the source
(several micro-batches under ``maxRecordsPerTrigger``, then a restart that sees new files), the
batch read, the sink (fed by Spark's own file streams, several micro-batches) and ``ordered()``
-- must equal :func:`~spark_stream_sched.testing.reference.reference_aggregate` exactly, and
the digest of its rows goes to ``$COMPAT_DIGESTS`` for the comparison across lines.

Lines without admission control for Python sources (pyspark 4.0 and 4.1) cap the source's
batches in the source's driver, and run ``Trigger.AvailableNow`` as one micro-batch
(docs/deploy.md, "Supported versions"); the tests say so where the batch counts differ.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from spark_stream_sched.spark import sink
from spark_stream_sched.spark.compat import ADMISSION_CONTROL
from spark_stream_sched.spark.transform import configure, ordered

from ..datagen import make_stream
from .data import AGGREGATES, FILES, N_INPUTS, SLIDE, WINDOW, matches_oracle, write_data

pytestmark = [pytest.mark.spark, pytest.mark.compat]

def collect_into(batches: list[tuple[int, list[dict[str, Any]]]]) -> Any:
    def collect(df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        if rows:
            batches.append((batch_id, rows))
    return collect


def source_stream(spark: Any, root: Path, **options: str) -> Any:
    reader = spark.readStream.format("ordered-agg")
    opts = {"inputs": ",".join(str(root / "data" / f"in{j}") for j in range(N_INPUTS)),
            "timestampColumn": "ts", "keyColumns": "meter", "window": WINDOW, "slide": SLIDE,
            "aggregates": ", ".join(AGGREGATES), "stateLocation": str(root / "state"),
            **options}
    for key, value in opts.items():
        reader = reader.option(key, value)
    return reader.load()


def logged_batches(checkpoint: Path) -> int:
    """Micro-batches Spark logged in the checkpoint's offset log."""
    return sum(1 for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())


def hold_back_files(root: Path) -> Path:
    """Move each input's last two files aside (the restart brings them back); the aside dir."""
    aside = root / "aside"
    for j in range(N_INPUTS):
        (aside / f"in{j}").mkdir(parents=True)
        for name in (f"part-{FILES - 2:05d}.parquet", f"part-{FILES - 1:05d}.parquet"):
            shutil.move(root / "data" / f"in{j}" / name, aside / f"in{j}" / name)
    return aside


def bring_back(root: Path, aside: Path) -> None:
    for j in range(N_INPUTS):
        for path in sorted((aside / f"in{j}").iterdir()):
            shutil.move(path, root / "data" / f"in{j}" / path.name)


def test_source_in_several_micro_batches_then_a_restart(spark: Any, tmp_path: Path,
                                                        digests: dict[str, str]) -> None:
    """Processing-time micro-batches capped by ``maxRecordsPerTrigger``, stop, new files, restart.

    The first run sees three of each input's five files (``endOfInput=never``: the windows the
    held-back rows may still reach stay open); the restart, from the same checkpoint, sees all
    five and finishes under ``Trigger.AvailableNow`` with ``endOfInput=availableNow``. Both
    runs together give the oracle's rows once each. The event time is a timestamp column (the
    other tests use int64 milliseconds).
    """
    tables = write_data(tmp_path, "timestamp")
    aside = hold_back_files(tmp_path)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    checkpoint = str(tmp_path / "checkpoint")
    first = (source_stream(spark, tmp_path, maxRecordsPerTrigger="120", endOfInput="never")
             .writeStream.foreachBatch(collect_into(batches))
             .option("checkpointLocation", checkpoint).start())
    first.processAllAvailable()
    first.stop()
    assert first.exception() is None
    planned = logged_batches(Path(checkpoint))
    assert planned >= 3, f"{planned} micro-batches; maxRecordsPerTrigger=120 over ~470 rows"
    bring_back(tmp_path, aside)
    second = (source_stream(spark, tmp_path, maxRecordsPerTrigger="120",
                            endOfInput="availableNow")
              .writeStream.foreachBatch(collect_into(batches))
              .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    second.awaitTermination(300)
    assert second.exception() is None
    rows = [r for _, batch in sorted(batches, key=lambda b: b[0]) for r in batch]
    digests["source-restart"] = matches_oracle("source-restart", rows, tables)


def test_source_available_now_in_one_run(spark: Any, tmp_path: Path,
                                         digests: dict[str, str]) -> None:
    """``Trigger.AvailableNow`` with ``endOfInput=availableNow`` reads everything and flushes.

    With admission control (pyspark 4.2+) the run takes several micro-batches of at most
    ``maxRecordsPerTrigger`` rows; without it Spark runs the trigger as one micro-batch.
    """
    tables = write_data(tmp_path)
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    checkpoint = tmp_path / "checkpoint"
    query = (source_stream(spark, tmp_path, maxRecordsPerTrigger="150",
                           endOfInput="availableNow")
             .writeStream.foreachBatch(collect_into(batches))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    planned = logged_batches(checkpoint)
    assert planned >= 3 if ADMISSION_CONTROL else planned == 1, planned
    rows = [r for _, batch in sorted(batches, key=lambda b: b[0]) for r in batch]
    digests["source-available-now"] = matches_oracle("source-available-now", rows, tables)


def test_batch_read(spark: Any, tmp_path: Path, digests: dict[str, str]) -> None:
    tables = write_data(tmp_path)
    reader = spark.read.format("ordered-agg")
    for key, value in {"inputs": ",".join(str(tmp_path / "data" / f"in{j}")
                                          for j in range(N_INPUTS)),
                       "keyColumns": "meter", "window": WINDOW, "slide": SLIDE,
                       "aggregates": ", ".join(AGGREGATES)}.items():
        reader = reader.option(key, value)
    rows = [r.asDict() for r in reader.load().collect()]
    digests["batch-read"] = matches_oracle("batch-read", rows, tables)


def file_streams(spark: Any, root: Path, max_files: int) -> list[Any]:
    """One Spark Parquet stream per input: its files, then its end-of-input file."""
    schema = spark.read.parquet(str(root / "data" / "in0")).schema
    return [spark.readStream.schema(schema).option("maxFilesPerTrigger", max_files)
            .parquet(str(root / "{data,ends}" / f"in{j}")) for j in range(N_INPUTS)]


def test_sink_in_several_micro_batches(spark: Any, tmp_path: Path,
                                       digests: dict[str, str]) -> None:
    """Spark's file streams (two files per micro-batch) into the sink, routed by group."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F  # noqa: N812

    tables = write_data(tmp_path)
    streams = [df.withColumn("input", F.lit(j)) for j, df in
               enumerate(file_streams(spark, tmp_path, 2))]
    rows = streams[0]
    for df in streams[1:]:
        rows = DataFrame.unionByName(rows, df)
    options = {"path": str(tmp_path / "windows"), "checkpointLocation": str(tmp_path / "ck"),
               "inputs": str(N_INPUTS), "inputColumn": "input", "sequenceColumn": "pos",
               "endOfInputColumn": "eof", "timestampColumn": "ts", "keyColumns": "meter",
               "window": WINDOW, "slide": SLIDE, "aggregates": ", ".join(AGGREGATES)}
    query = (sink.partition_for_sink(rows, options).writeStream.format("ordered-agg")
             .options(**options).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    commits = [m for m in sink.read_commits(sink.parse_sink_options(options))
               if m.get("batch_id") is not None]
    assert len(commits) >= 3, commits
    files = sorted((tmp_path / "windows").glob("part-*.parquet"))
    got = [r for f in files for r in pq.read_table(f).to_pylist()]
    digests["sink"] = matches_oracle("sink", got, tables)


def test_ordered_transformation(spark: Any, tmp_path: Path, digests: dict[str, str]) -> None:
    """``ordered()`` in the line's ``transformWithStateInPandas``, RocksDB state store."""
    tables = write_data(tmp_path)
    configure(spark)
    windows = (ordered(file_streams(spark, tmp_path, 2), sequence="pos", keys=["meter"],
                       end_of_input="eof").window(WINDOW, SLIDE).agg(*AGGREGATES))
    batches: list[tuple[int, list[dict[str, Any]]]] = []
    query = (windows.writeStream.foreachBatch(collect_into(batches))
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    digests["ordered"] = matches_oracle("ordered", [r for _, b in batches for r in b], tables)


DUMMY_SOURCE = '''
from pyspark.sql.datasource import DataSource, DataSourceReader


class Reader(DataSourceReader):
    def read(self, partition):
        yield (42,)


class DefaultSource(DataSource):
    @classmethod
    def name(cls):
        return "compat-dummy"

    def schema(self):
        return "answer int"

    def reader(self, schema):
        return Reader()
'''

BOTH_FORMATS = '''
import sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print("dummy", spark.read.format("compat-dummy").load().collect()[0].answer)
rows = (spark.read.format("ordered-agg").option("inputs", sys.argv[1])
        .option("window", "10 seconds").option("aggregates", "count(*) as n").load().collect())
print("ordered-agg", sum(r.n for r in rows))
'''


@pytest.mark.slow
def test_another_auto_registered_data_source_is_still_found(tmp_path: Path) -> None:
    """pyspark's lookup imports every ``pyspark_*`` module; ours must not hide the others."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "pyspark_compat_dummy.py").write_text(textwrap.dedent(DUMMY_SOURCE))
    (tmp_path / "job.py").write_text(textwrap.dedent(BOTH_FORMATS))
    table = make_stream(3, 0, 50)
    (tmp_path / "in0").mkdir()
    pq.write_table(table, tmp_path / "in0" / "part-00000.parquet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(tmp_path / "in0")],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dummy 42" in done.stdout
    assert f"ordered-agg {table.num_rows}" in done.stdout
