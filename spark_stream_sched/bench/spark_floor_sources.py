"""Two floor sources for ``bench spark``: what Spark itself costs around a Python source.

* ``sss-floor-precomputed``: per micro-batch, each task yields precomputed result batches (Arrow
  IPC files written beforehand: the very batches the ``ordered-agg`` source yields for the same
  data and admission) and nothing else;
* ``sss-floor-empty``: the same micro-batches and tasks, yielding nothing.

Options: ``results`` (directory with ``schema.arrow`` and ``batch-<b>/part-<p>.arrow``),
``batches`` (micro-batches), ``partitions`` (tasks per micro-batch). Offsets are
``{"batch": b}``; every ``latestOffset`` call admits one more micro-batch until ``batches``,
like a ``Trigger.AvailableNow`` catch-up of the real source. :mod:`.spark_floor` writes the
files and runs the queries. Driver calls and ``read()`` do no work beyond this, so the time of
a query over them is Spark's floor for that output and that number of micro-batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StructType


def part_path(results: str, batch: int, part: int) -> str:
    """File of precomputed rows of micro-batch ``batch``, task ``part``."""
    return os.path.join(results, f"batch-{batch:06d}", f"part-{part:04d}.arrow")


def schema_path(results: str) -> str:
    """File holding the (Spark-typed) Arrow schema of the results."""
    return os.path.join(results, "schema.arrow")


@dataclass(frozen=True)
class FloorPartition(InputPartition):
    """One task of one floor micro-batch."""

    batch: int
    part: int


class _FloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One micro-batch per ``latestOffset`` call; ``read()`` yields the precomputed rows or none.

    Driver methods are called on the driver; ``read()`` runs on executors.
    """

    def __init__(self, results: str, batches: int, partitions: int, empty: bool) -> None:
        self.results, self.batches, self.partitions_n = results, batches, partitions
        self.empty = empty

    def initialOffset(self) -> dict[str, Any]:
        """Before the first micro-batch."""
        return {"batch": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        """Everything: the batch count, not a row limit, paces the floor."""
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to freeze: the batches are fixed by option ``batches``."""

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """One more micro-batch, up to ``batches``."""
        return {"batch": min(int(start["batch"]) + 1, self.batches)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """``partitions`` tasks per micro-batch between the offsets."""
        return [FloorPartition(b, p) for b in range(int(start["batch"]), int(end["batch"]))
                for p in range(self.partitions_n)]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to clean up."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The precomputed record batches of this task (memory-mapped), or nothing."""
        assert isinstance(partition, FloorPartition)
        if self.empty:
            return
        path = part_path(self.results, partition.batch, partition.part)
        if os.path.exists(path):
            with pa.memory_map(path, "r") as source:
                yield from pa.ipc.open_file(source).read_all().to_batches()


class FloorPrecomputedDataSource(DataSource):
    """``format("sss-floor-precomputed")``: yields precomputed result batches."""

    empty = False

    @classmethod
    def name(cls) -> str:
        """Short name used in ``format(...)``."""
        return "sss-floor-precomputed"

    def schema(self) -> StructType:
        """The results' schema, stored next to them (called on the driver)."""
        with pa.memory_map(schema_path(self.options["results"]), "r") as source:
            return from_arrow_schema(pa.ipc.open_file(source).schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The floor's stream reader (called on the driver)."""
        return _FloorReader(self.options["results"], int(self.options["batches"]),
                            int(self.options["partitions"]), self.empty)


class FloorEmptyDataSource(FloorPrecomputedDataSource):
    """``format("sss-floor-empty")``: the same micro-batches and tasks, yielding nothing."""

    empty = True

    @classmethod
    def name(cls) -> str:
        """Short name used in ``format(...)``."""
        return "sss-floor-empty"


class DiscardingProcessor(StatefulProcessor):
    """A ``transformWithStateInPandas`` processor that reads its rows and keeps nothing.

    ``bench spark``'s ``floor-tws``: the transformation's own input (packed by group) through
    Spark's stateful operator with this processor is what Spark's machinery costs on its own.
    It declares no state variable and makes no state call: the state store is opened and
    committed every micro-batch but holds nothing.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        """No state variable (executors)."""

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802 - Spark API
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Read every frame of the group, emit nothing (executors)."""
        for _ in rows:
            continue
        return iter(())

    def close(self) -> None:
        """Nothing to release."""


class DiscardingRowProcessor(DiscardingProcessor):
    """:class:`DiscardingProcessor` for the row-based ``transformWithState`` (pyspark >= 4.1).

    ``bench spark``'s ``floor-tws-row``: the same packed input and the same (no) state, the rows
    handed over one ``pyspark.sql.Row`` at a time instead of in pandas frames.
    """

    def handleInputRows(self, key: Any, rows: Iterator[Any],  # noqa: N802 - Spark API
                        timerValues: TimerValues) -> Iterator[Any]:  # noqa: N803
        """Read every row of the group, emit nothing (executors)."""
        for _ in rows:
            continue
        return iter(())


def discard_with_state(key: Any, frames: Iterator[pd.DataFrame],
                       state: Any) -> Iterator[pd.DataFrame]:
    """``floor-apply-in-pandas-with-state``'s function: read every frame, emit nothing.

    Like :class:`DiscardingProcessor` it never touches ``state`` (no ``get``, ``update`` or
    ``remove``): the group's state stays absent, so Spark's store holds nothing for it
    (executors).
    """
    for _ in frames:
        continue
    return iter(())


def register_floors(spark: Any) -> None:
    """Register both floor sources with ``spark`` (driver)."""
    spark.dataSource.register(FloorPrecomputedDataSource)
    spark.dataSource.register(FloorEmptyDataSource)


def precompute_results(options: dict[str, str], results: str) -> tuple[int, int]:
    """Write what ``ordered-agg`` yields for ``options``, per micro-batch and task.

    Runs the source's own driver and ``read()`` in this process (no Spark session), as a
    ``Trigger.AvailableNow`` run would: the same admission, micro-batches and partitions.
    ``options`` must hold their own ``stateLocation``. Returns ``(micro-batches, tasks per
    micro-batch)``. Called on the driver.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    from spark_stream_sched.spark.datasource import OrderedAggDataSource
    from spark_stream_sched.spark.source import OrderedAggStreamReader

    source = OrderedAggDataSource(options)
    reader = source.streamReader(source.schema())
    assert isinstance(reader, OrderedAggStreamReader)
    arrow_schema = to_arrow_schema(source.schema(), timezone="UTC")
    os.makedirs(results, exist_ok=True)
    _write(schema_path(results), arrow_schema.empty_table())
    offset = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    batches = partitions = 0
    try:
        while True:
            end = reader.latestOffset(offset, reader.getDefaultReadLimit())
            if end == offset:
                return batches, partitions
            tasks = reader.partitions(offset, end)
            partitions = max(partitions, len(tasks))
            for task in tasks:
                table = pa.Table.from_batches(list(reader.read(task)), arrow_schema)
                _write(part_path(results, batches, task.index), table)  # type: ignore[attr-defined]
            reader.commit(end)
            offset, batches = end, batches + 1
    finally:
        reader.stop()


def _write(path: str, table: pa.Table) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
