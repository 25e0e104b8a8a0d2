"""Floors for ``bench spark``: Spark's own cost of moving the source's output, measured alike.

Two minimal Python streaming sources (``spark/floor.py``) write into the same Parquet sink as
the ``ordered-agg`` source, with the same micro-batches and tasks per micro-batch:

* ``floor-precomputed`` yields the result batches the source yields (precomputed in this
  process by the source's own driver and ``read()``,
  :func:`~spark_stream_sched.spark.floor.precompute_results`);
* ``floor-empty`` yields nothing.

``source time / floor-precomputed time`` is then what the source adds over a source that does no
work at all; ``floor-empty`` is the pure per-micro-batch cost.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

#: Engines of the floors, as named in the results.
FLOORS = ("floor-precomputed", "floor-empty")


def prepare_floor(options: dict[str, str], results: Path) -> tuple[int, int]:
    """Precompute the source's output for ``options``; return (micro-batches, tasks each)."""
    from spark_stream_sched.spark.floor import precompute_results

    return precompute_results({**options, "stateLocation": str(results / "state")},
                              str(results / "rows"))


def run_floor(spark: Any, engine: str, results: Path, batches: int, partitions: int,
              out: Path) -> float:
    """Run one floor query into Parquet under ``out``; return its wall time in seconds."""
    from spark_stream_sched.jobs.runner import await_query
    from spark_stream_sched.spark.floor import register_floors

    register_floors(spark)
    name = {"floor-precomputed": "sss-floor-precomputed", "floor-empty": "sss-floor-empty"}
    frame = (spark.readStream.format(name[engine]).option("results", str(results / "rows"))
             .option("batches", str(batches)).option("partitions", str(partitions)).load())
    started = time.perf_counter()
    query = (frame.writeStream.format("parquet").option("path", str(out / "output"))
             .option("checkpointLocation", str(out / "ck")).trigger(availableNow=True).start())
    await_query(query)
    return time.perf_counter() - started


def batches_run(out: Path) -> int:
    """Micro-batches a finished query committed (files in ``<checkpoint>/commits``)."""
    commits = out / "ck" / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0
