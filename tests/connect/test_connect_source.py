"""The ``ordered-agg`` source from a Spark Connect client: stream and batch read equal the oracle.

The client only calls pyspark's public API; the format is found on the server without
``register()`` (the server's Python has ``pyspark_ordered_agg``). Progress comes from the
source's files (:mod:`spark_stream_sched.progress`) and from the listener, which runs in the
client over Connect.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.listener import StreamingQueryListener

from spark_stream_sched.progress import format_line, source_progress
from spark_stream_sched.runtime.state import batch_metrics
from spark_stream_sched.spark.metrics import OrderedAggProgress
from tests.spark.helpers import (
    assert_matches_oracle,
    expected_rows,
    output_key,
    source_options,
    write_inputs,
)

pytestmark = pytest.mark.connect


class Ended(StreamingQueryListener):
    """Sets :attr:`done` when a query-terminated event reaches the client's listener bus."""

    def __init__(self) -> None:
        self.done = threading.Event()

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        self.done.set()


@dataclass
class SourceRun:
    """One ``Trigger.AvailableNow`` run of the source into Parquet, with a listener attached."""

    root: Path
    tables: list[Any]
    state: str
    query: Any
    listener: OrderedAggProgress
    seen: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture(scope="module")
def source_run(connect: Any, tmp_path_factory: pytest.TempPathFactory) -> SourceRun:
    root = tmp_path_factory.mktemp("connect-source")
    tables = write_inputs(str(root / "in"), rows=250)
    state = str(root / "state")
    opts = source_options(str(root / "in"), 3, state, maxRecordsPerTrigger=200)
    seen: list[dict[str, Any]] = []
    listener = OrderedAggProgress(connect, state, callback=seen.append)
    ended = Ended()  # added after the listener: it hears the end after the listener's events
    connect.streams.addListener(ended)
    query = (connect.readStream.format("ordered-agg").options(**opts).load()
             .writeStream.format("parquet").option("path", str(root / "out"))
             .option("checkpointLocation", str(root / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    assert ended.done.wait(120), "the query-terminated event never reached the client"
    connect.streams.removeListener(ended)
    return SourceRun(root, tables, state, query, listener, seen)


def test_stream_into_parquet_equals_the_oracle(source_run: SourceRun) -> None:
    rows = pq.read_table(source_run.root / "out").to_pylist()
    assert_matches_oracle(sorted(rows, key=output_key), expected_rows(source_run.tables))


def test_batch_read_equals_the_oracle(connect: Any, tmp_path: Path) -> None:
    tables = write_inputs(str(tmp_path / "in"), n_inputs=2, rows=200)
    opts = source_options(str(tmp_path / "in"), 2, str(tmp_path / "state"))
    rows = connect.read.format("ordered-agg").options(**opts).load().collect()
    assert_matches_oracle(sorted((r.asDict() for r in rows), key=output_key),
                          expected_rows(tables))
    assert not (tmp_path / "state").exists()  # a batch read keeps its state in memory


def test_progress_from_the_files_matches_spark_progress(source_run: SourceRun) -> None:
    spark_batches = {p.batchId: p for p in source_run.query.recentProgress}
    batches = source_progress(source_run.state, source_run.query.recentProgress)
    assert [b["batch_id"] for b in batches] == sorted(spark_batches)
    assert len(batches) >= 3  # maxRecordsPerTrigger=200 over 861 rows
    for b in batches:
        assert b["spark_input_rows"] == spark_batches[b["batch_id"]].numInputRows
        assert b["windows_out"] == b["spark_input_rows"]  # the source's rows are its windows
        assert f"ordered-agg source batch {b['batch_id']}: " in format_line(b)
    assert sum(b["rows_read"] for b in batches) == sum(t.num_rows for t in source_run.tables)
    later = source_progress(source_run.state, after=batches[0]["batch_id"])
    assert [b["batch_id"] for b in later] == [b["batch_id"] for b in batches[1:]]


def test_the_listener_runs_in_the_connect_client(source_run: SourceRun) -> None:
    """``OrderedAggProgress`` hears every batch; leaving it works without a SparkContext.

    Before, ``remove()`` read ``spark.sparkContext``, which a Connect session does not have
    (``PySparkAttributeError: [JVM_ATTRIBUTE_NOT_SUPPORTED]``).
    """
    source_run.listener.remove()
    from_files = source_progress(source_run.state, source_run.query.recentProgress)
    # The driver adds the location's size and its own RSS when Spark commits a batch to the
    # source, which Spark does when it plans the next one: before or after the listener (on
    # the client, asynchronously) reads the batch's figures. The rest must be equal.
    at_commit = {"location_files", "location_bytes", "driver_rss_bytes"}

    def settled(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in b.items() if k not in at_commit} for b in batches]

    assert settled(source_run.seen) == settled(from_files)
    assert settled([source_run.listener.latest]) == settled(from_files[-1:])
    assert all(at_commit <= set(b) for b in from_files[:-1])  # the last batch is not committed


def test_the_metrics_files_read_through_the_server(connect: Any, source_run: SourceRun) -> None:
    """A client that does not see the server's files reads the figures with Spark itself."""
    rows = (connect.read.json(str(Path(source_run.state) / "metrics" / "batch-*.json"))
            .select("batch_id", "rows_read", "windows_out").collect())
    from_files = {b["batch_id"]: b for b in source_progress(source_run.state)}
    assert sorted(r.batch_id for r in rows) == batch_metrics.batch_ids(source_run.state)
    assert len(rows) >= 3
    for r in rows:
        assert (r.rows_read, r.windows_out) == (from_files[r.batch_id]["rows_read"],
                                                from_files[r.batch_id]["windows_out"])
