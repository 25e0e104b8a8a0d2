"""Floors for ``bench spark``: Spark's own cost of what our engines cannot avoid, measured alike.

Under the source, two minimal Python streaming sources (:mod:`.spark_floor_sources`) write into
the same
Parquet sink as the ``ordered-agg`` source, with the same micro-batches and tasks per
micro-batch:

* ``floor-precomputed`` yields the result batches the source yields (precomputed in this
  process by the source's own driver and ``read()``,
  :func:`~spark_stream_sched.bench.spark_floor_sources.precompute_results`);
* ``floor-empty`` yields nothing.

``source time / floor-precomputed time`` is then what the source adds over a source that does no
work at all; ``floor-empty`` is the pure per-micro-batch cost.

Under the transformation and the sink, whose inputs are Spark's own file streams (the same
queries as native's inputs, with the same batching), two floors read those inputs and do no work:

* ``floor-input``: Spark reads the columns the query needs (event time, keys, the aggregates'
  columns, the file position and the input id) into the ``noop`` sink;
* ``floor-python``: the same rows handed to a Python ``mapInArrow`` that only counts them
  (:func:`count_rows`), into the ``noop`` sink. Every engine whose runtime is Python (the
  transformation and the sink) has to move each row across this boundary at least once, so
  ``floor-python`` is the least such an engine can take here;
* ``floor-tws``: the transformation's own input (unioned and packed by group,
  :func:`~spark_stream_sched.spark.transform.packed_inputs`) through
  ``transformWithStateInPandas`` (RocksDB, no timers) with a processor that reads its rows and
  keeps nothing (:class:`~.spark_floor_sources.DiscardingProcessor`), into the
  ``noop`` sink: Spark's stateful machinery on its own;
* ``floor-apply-in-pandas-with-state`` and ``floor-tws-row``: floor-tws's packed input, into
  the same sink, through Spark's other two stateful Python operators (RocksDB state store
  too), each doing nothing the same way: ``applyInPandasWithState`` (append mode, no timeout;
  the operator ``ordered()`` runs on) with a function that reads its frames, emits nothing and
  never touches its group's state (:func:`~.spark_floor_sources.discard_with_state`;
  ``floor-apply-in-pandas-with-state-keyed`` the same for transform-keyed's input), and the
  row-based ``transformWithState``
  (pyspark >= 4.1) with :class:`~.spark_floor_sources.DiscardingRowProcessor`. Where the
  installed pyspark lacks an operator, :func:`~.spark_native.unavailable` says why and the engine is
  reported as not available instead of run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

#: Floors that replay the source's precomputed micro-batches.
SOURCE_FLOORS = ("floor-precomputed", "floor-empty")
#: Floors of Spark's stateful operators on the transformation's packed input (end rows too).
PACKED_FLOORS = ("floor-tws", "floor-apply-in-pandas-with-state",
                 "floor-apply-in-pandas-with-state-keyed", "floor-tws-row")
#: Floors that read the file streams of native, the transformation and the sink.
INPUT_FLOORS = ("floor-input", "floor-python", *PACKED_FLOORS)
#: Engines of the floors, as named in the results.
FLOORS = (*SOURCE_FLOORS, *INPUT_FLOORS)
#: Floors that emit no result rows (nothing to compare with the truth).
NO_OUTPUT = ("floor-empty", *INPUT_FLOORS)


@dataclass(frozen=True)
class Floor:
    """The source's precomputed output: where, in how many micro-batches of how many tasks."""

    results: Path
    batches: int
    partitions: int


def prepare_floor(options: dict[str, str], root: Path) -> Floor:
    """Precompute the source's output for ``options`` under ``root``."""
    from spark_stream_sched.bench.spark_floor_sources import precompute_results

    batches, partitions = precompute_results({**options, "stateLocation": str(root / "state")},
                                             str(root / "rows"))
    return Floor(root / "rows", batches, partitions)


def floor_stream(spark: Any, engine: str, floor: Floor) -> Any:
    """The streaming DataFrame of one source floor (``engine``: one of :data:`SOURCE_FLOORS`)."""
    from spark_stream_sched.bench.spark_floor_sources import register_floors

    register_floors(spark)
    name = {"floor-precomputed": "sss-floor-precomputed", "floor-empty": "sss-floor-empty"}
    return (spark.readStream.format(name[engine]).option("results", str(floor.results))
            .option("batches", str(floor.batches))
            .option("partitions", str(floor.partitions)).load())


def batches_run(out: Path) -> int:
    """Micro-batches a finished query committed (files in ``<checkpoint>/commits``)."""
    commits = out / "ck" / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0


def count_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``floor-python``'s ``mapInArrow`` function: one row with the number of rows it got."""
    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pydict({"rows": pa.array([rows], pa.int64())})
