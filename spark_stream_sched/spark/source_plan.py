"""The ``ordered-agg`` source's query plan: options + input schema, partitions, row reading.

Shared by the streaming reader (:mod:`.source`) and the batch reader (:mod:`.batch`):
:class:`SourcePlan` (validated options and the resolved input schema, picklable),
:class:`GroupRangePartition` (one Spark task's work, the only per-batch channel to ``read()``),
:func:`rows_between` (the rows of all inputs between two offsets) and :func:`to_spark` (runtime
output in Spark's exact Arrow types). No Spark session is needed to use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from spark_stream_sched import inputs
from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs import InputStream
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.query.batch import GroupedBatch
from spark_stream_sched.runtime.window.aggregator import (
    BOUND_COLUMNS,
    SPARK_TIMESTAMP,
    bounds_as_timestamps,
)
from spark_stream_sched.spark.offsets import Offset
from spark_stream_sched.spark.options import SourceConfig, parse_options

#: Arrow record batches yielded by read() hold at most this many rows.
OUTPUT_BATCH_ROWS = 65_536


# -- the query, resolved once on the driver ---------------------------------------------------


@dataclass(frozen=True)
class SourcePlan:
    """Validated options plus the resolved input schema (picklable; shipped to executors)."""

    config: SourceConfig
    input_schema: pa.Schema

    @property
    def streams(self) -> list[InputStream]:
        """The input streams, in input-id order."""
        return [InputStream(i, p, self.config.format, self.input_schema)
                for i, p in enumerate(self.config.inputs)]

    @property
    def ts_is_timestamp(self) -> bool:
        """Whether the input event time is a timestamp (else int64 milliseconds)."""
        ts_type = self.input_schema.field(self.config.timestamp_column).type
        return bool(pa.types.is_timestamp(ts_type))

    def batch(self, groups: Sequence[int]) -> GroupedBatch:
        """The runtime's micro-batch entry for the partition groups ``groups``."""
        c = self.config
        return GroupedBatch(c.spec, self.input_schema, tuple(groups), c.scheduler, c.workers)

    def output_arrow_schema(self) -> pa.Schema:
        """Arrow schema of the result rows before conversion to Spark's types."""
        schema = self.config.spec.build(self.input_schema).output_schema
        if self.ts_is_timestamp:
            for name in BOUND_COLUMNS:
                if name in schema.names:
                    schema = schema.set(schema.get_field_index(name),
                                        pa.field(name, SPARK_TIMESTAMP))
        return schema


def build_plan(options: Any, streaming: bool = True) -> SourcePlan:
    """Parse options and resolve the input schema (option ``schema`` or the first file).

    ``streaming`` False: a batch read, which needs no ``stateLocation``.

    Notes
    -----
    Called on the driver; raises :class:`~spark_stream_sched.errors.ConfigError` early.
    """
    config = parse_options(dict(options), streaming)
    schema = inputs.resolve_schema(config.inputs, config.format, config.schema)
    config.spec.build(schema)  # columns, key, aggregate and filter types are checked here
    return SourcePlan(config, schema)


@dataclass(frozen=True)
class GroupRangePartition(InputPartition):
    """One Spark task's work: the partition groups it owns and the batch's offsets.

    Must be picklable: it is the only per-batch channel from the driver to ``read()``.
    """

    index: int
    groups: tuple[int, ...]
    start: dict[str, Any]
    end: dict[str, Any]
    files: tuple[tuple[str, ...], ...]
    #: late files skipped so far over all inputs (``lateFiles=skip``), for the metrics line
    late_files_skipped: int = 0



def to_spark(result: pa.Table, arrow_schema: pa.Schema, ts_is_timestamp: bool) -> pa.Table:
    """Cast runtime output to the exact Arrow types Spark expects for the declared schema."""
    if ts_is_timestamp:
        result = bounds_as_timestamps(result)
    return result.cast(arrow_schema)



def rows_between(plan: SourcePlan, files: tuple[tuple[str, ...], ...], start: Offset,
                  end: Offset) -> pa.Table:
    """Rows of all inputs between the offsets, with ``__input``/``__seq`` columns."""
    c = plan.config
    parts = []
    for j, stream in enumerate(plan.streams):
        rows, _, seq = inputs.read_between(
            stream, list(files[j]), start.cursors[j], end.cursors[j], c.timestamp_column,
            c.out_of_order)
        rows = rows.append_column(INPUT_COL, pa.array(np.full(len(seq), j, np.int32)))
        parts.append(rows.append_column(SEQ_COL, pa.array(seq)))
    return pa.concat_tables(parts)


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
