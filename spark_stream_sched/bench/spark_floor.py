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

from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Engines of the floors, as named in the results.
FLOORS = ("floor-precomputed", "floor-empty")


@dataclass(frozen=True)
class Floor:
    """The source's precomputed output: where, in how many micro-batches of how many tasks."""

    results: Path
    batches: int
    partitions: int


def prepare_floor(options: dict[str, str], root: Path) -> Floor:
    """Precompute the source's output for ``options`` under ``root``."""
    from spark_stream_sched.spark.floor import precompute_results

    batches, partitions = precompute_results({**options, "stateLocation": str(root / "state")},
                                             str(root / "rows"))
    return Floor(root / "rows", batches, partitions)


def floor_stream(spark: Any, engine: str, floor: Floor) -> Any:
    """The streaming DataFrame of one floor (``engine``: one of :data:`FLOORS`)."""
    from spark_stream_sched.spark.floor import register_floors

    register_floors(spark)
    name = {"floor-precomputed": "sss-floor-precomputed", "floor-empty": "sss-floor-empty"}
    return (spark.readStream.format(name[engine]).option("results", str(floor.results))
            .option("batches", str(floor.batches))
            .option("partitions", str(floor.partitions)).load())


def batches_run(out: Path) -> int:
    """Micro-batches a finished query committed (files in ``<checkpoint>/commits``)."""
    commits = out / "ck" / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0
