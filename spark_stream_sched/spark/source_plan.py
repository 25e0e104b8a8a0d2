"""The source's Spark side of a plan: the partition ``read()`` receives, Spark's exact types.

:class:`GroupRangePartition` is one Spark task's work and the only per-batch channel from the
driver to ``read()``; :func:`to_spark` casts runtime output to the Arrow types Spark expects for
the declared schema; :func:`check_schema_matches` refuses a user-given schema that differs from
the result's. The plan itself is pure: :mod:`spark_stream_sched.inputs.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.plan import SourcePlan
from spark_stream_sched.runtime.window.aggregator import bounds_as_timestamps


@dataclass(frozen=True)
class GroupRangePartition(InputPartition):
    """One Spark task's work: the partition groups it owns and the batch's offsets.

    Must be picklable: it is the only per-batch channel from the driver to ``read()``. The
    groups are a contiguous range, or under distributed adaptation the groups the batch's
    recorded assignment gives this task, with ``pushes`` the ones whose join state it pushes to
    disk first; ``hold`` is the query's hold bound for the batch
    (:mod:`~spark_stream_sched.runtime.engine.batch`).
    """

    index: int
    groups: tuple[int, ...]
    start: dict[str, Any]
    end: dict[str, Any]
    files: tuple[tuple[str, ...], ...]
    #: late files skipped so far over all inputs (``lateFiles=skip``), for the metrics line
    late_files_skipped: int = 0
    #: the task's rows, split once on the driver (``inputs/split.py``); None: read them
    rows_file: str | None = None
    #: rows of the whole batch and late rows the driver dropped (``outOfOrder=drop``)
    rows_total: int | None = None
    late_dropped: int = 0
    #: groups of this task whose join state is pushed to disk before the batch
    pushes: tuple[int, ...] = ()
    hold: int | None = None


def to_spark(result: pa.Table, arrow_schema: pa.Schema, ts_is_timestamp: bool) -> pa.Table:
    """Cast runtime output to the exact Arrow types Spark expects for the declared schema."""
    if ts_is_timestamp:
        result = bounds_as_timestamps(result)
    return result.cast(arrow_schema)


def check_schema_matches(plan: SourcePlan, schema: StructType) -> None:
    """Refuse a user-given schema (``readStream.schema(...)``) that differs from the result's.

    Raises
    ------
    ConfigError
        Naming both schemas; the result schema is derived from the options.
    """
    expected = from_arrow_schema(plan.output_arrow_schema())
    if expected.simpleString() != schema.simpleString():
        raise ConfigError(f"the schema given to readStream.schema() {schema.simpleString()} "
                          f"differs from the result schema of the ordered-agg options "
                          f"{expected.simpleString()}; omit .schema() or make it match")
