"""Driver program of the soak test: one ``ordered-agg`` query, sampled after every micro-batch.

Usage: ``python -m tests.spark.soak_driver <job.json>`` (written by :mod:`tests.spark.soak`).
The job runs the source (``mode: source``: a ``Trigger.AvailableNow`` query whose batches land
in ``<out>/batch-<id>.parquet``, written atomically so a replayed batch overwrites its own file)
or the sink (``mode: sink``: file streams into ``writeStream.format("ordered-agg")``, then
``finish_sink``). After every batch (the sink: from a query listener, and once more for the
last batch when the query has stopped) it appends one JSON line to ``samples``: the batch id, the
resident memory of the JVM, of the driver's Python processes and of the largest Python worker
(every process of this driver's session, by its command line), and the files and bytes under
the state location; then it prints ``BATCH <id>``. ``DONE`` ends a run that was not killed.
Crash points (``spark_stream_sched.faults``) are armed through the environment by the test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from spark_stream_sched.runtime.state.usage import process_rss, tree_size

from .sink_driver import driver_session, start_sink


def session_rss() -> dict[str, int]:
    """RSS by role of every process in this session (the driver was started in a new one)."""
    session, jvm, driver, worker = os.getsid(0), 0, 0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getsid(int(entry)) != session:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ")
        except (OSError, ProcessLookupError):
            continue
        rss = process_rss(int(entry)) or 0
        if b"/java " in command or command.startswith(b"java "):
            jvm += rss
        elif b"pyspark.daemon pyspark.worker" in command:
            worker = max(worker, rss)  # forked workers of one daemon share its pages
        else:  # this program, the source runner, the sink's commit runner, planner workers
            driver += rss
    return {"jvm_rss_bytes": jvm, "driver_rss_bytes": driver, "worker_rss_bytes": worker}


def sample(job: dict[str, Any], batch_id: int) -> None:
    files, size = tree_size(job["state"])
    record = {"batch_id": batch_id, "wall": round(time.time(), 3), "location_files": files,
              "location_bytes": size, **session_rss()}
    with open(job["samples"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print(f"BATCH {batch_id}", flush=True)


def run_source(spark: Any, job: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    from spark_stream_sched.runtime.state.atomic import atomic_writer

    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)

    def write_batch(df: Any, batch_id: int) -> None:
        with atomic_writer(str(out / f"batch-{batch_id:05d}.parquet")) as tmp:
            pq.write_table(df.toArrow(), tmp)
        sample(job, batch_id)

    query = (spark.readStream.format("ordered-agg").options(**job["options"]).load()
             .writeStream.foreachBatch(write_batch).option("checkpointLocation", job["checkpoint"])
             .trigger(availableNow=True).start())
    query.awaitTermination()


def run_sink(spark: Any, job: dict[str, Any]) -> None:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    from spark_stream_sched.spark import sink

    class Sampler(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's API
            pass

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            sample(job, int(event.progress.batchId))

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    spark.streams.addListener(Sampler())
    query = start_sink(spark, [Path(d) for d in job["dirs"]], job["options"], 1, True)
    query.awaitTermination()
    if query.lastProgress:  # the listener bus is asynchronous: the last event may not be in
        sample(job, int(query.lastProgress["batchId"]))  # (a second sample of it is harmless)
    sink.finish_sink(job["options"])


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        job = json.load(fh)
    spark = driver_session()
    (run_source if job["mode"] == "source" else run_sink)(spark, job)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
