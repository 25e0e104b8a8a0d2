"""Ordered windows as a streaming DataFrame transformation, run in Spark's own stateful operator.

``ordered([df0, df1], sequence="offset", keys=["meter"]).window("10 s").agg("count(*) as n")``
is a streaming DataFrame for any sink (docs/transform.md). The inputs are tagged with their id,
unioned, packed by partition group (the runtime's stable key hash) and grouped by it into
``applyInPandasWithState`` with
:class:`~spark_stream_sched.spark.transform_processor.OrderedProcessor`, state in RocksDB.

Where the ready bound comes from
--------------------------------
Spark's watermark is not used. Each input is one partition per micro-batch, and
:func:`~spark_stream_sched.runtime.engine.packing.pack` sends that partition's order summary
(per input: its largest event time, its first row, its first out-of-order row, whether it held
the input's end-of-input row) to *every* partition group, with or without rows for it. Each
group keeps every input's largest event time so far, ``seen_j``, in its state, so in every
micro-batch with data every group computes the same ``R = min_j seen_j``
(:func:`~spark_stream_sched.runtime.engine.sequence_order.ready_bound_from_seen`). Then:

* *no row is released early*: a row is released only when ``ts < R``, and every later row of
  input ``j`` has ``ts >= seen_j >= R`` (a lower one is out of order: refused or dropped by
  name), so nothing can still arrive before a released row;
* *nothing waits forever*: ``R`` changes only when some input sends rows (or its end), and then
  every group runs in that same micro-batch, because every group receives the summaries.

End of input: a row whose ``end_of_input`` column is true declares its input finished (its
``seen_j`` becomes the largest event time, and a later row of it is refused); when every input
has finished, everything is released and every window is emitted.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.figures import OBSERVED_IN, OBSERVED_OUT
from spark_stream_sched.runtime.engine.packing import GROUP, ORDER, RESULTS, ROWS, pack, unpack
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX
from spark_stream_sched.runtime.query.spec import (
    DEFAULT_PARTITION_GROUPS,
    QuerySpec,
    spec_from_options,
)
from spark_stream_sched.runtime.window.aggregator import BOUND_COLUMNS, SPARK_TIMESTAMP
from spark_stream_sched.spark.compat import arrow_schema
from spark_stream_sched.spark.embedded import (
    PROVIDER_CONF,
    ROCKSDB_PROVIDER,
    check_workers_python,
    configure,
)
from spark_stream_sched.spark.transform_processor import STATE_SCHEMA, OrderedProcessor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["OrderedStreams", "WindowedStreams", "configure", "ordered", "packed_inputs"]

#: Internal columns (Spark renames names starting with ``__`` in the pandas frames).
INPUT, END = "_sss_input", "_sss_end"


def ordered(inputs: Sequence[DataFrame], *, sequence: str, timestamp: str = "ts",
            keys: Sequence[str] = (), end_of_input: str | None = None,
            out_of_order: str = "fail",
            partition_groups: int = DEFAULT_PARTITION_GROUPS) -> OrderedStreams:
    """N streaming DataFrames merged in the total order ``(ts, input, seq)`` (README, "Semantics").

    Parameters
    ----------
    inputs:
        Streaming DataFrames with one schema; input ``j`` is ``inputs[j]``, each sorted by
        ``timestamp`` (non-decreasing).
    sequence:
        Column whose ascending order is the input's order (a Kafka offset, a file position
        such as ``file_name#row_index``): it orders rows of one input with equal timestamps.
    timestamp:
        Event-time column: long (ms since the epoch) or timestamp.
    keys:
        Key columns; each key's rows go to one partition group (stable hash).
    end_of_input:
        Optional boolean column: a row with ``true`` declares its input finished (the row
        itself is not data). Without it, the last windows stay open, as Spark's own windows.
    out_of_order:
        ``fail`` or ``drop`` for a row whose ``timestamp`` is below that of an earlier row of
        its input along ``sequence`` (the same rows in every batching,
        :mod:`~spark_stream_sched.runtime.engine.sequence_order`).
    partition_groups:
        Number of groups: the keys of Spark's state store and of the operator's calls.

    Notes
    -----
    Called on the driver; defines, runs nothing.
    """
    return OrderedStreams(tuple(inputs), sequence, timestamp, tuple(keys), end_of_input,
                          out_of_order, partition_groups)


@dataclass(frozen=True, eq=False)
class OrderedStreams:
    """Ordered inputs, optionally through keyed operators (see :func:`ordered`).

    Each method only defines; the result DataFrame is built (and validated) on the driver.
    """

    inputs: tuple[DataFrame, ...]
    sequence: str
    timestamp: str
    keys: tuple[str, ...]
    end_of_input: str | None
    out_of_order: str
    partition_groups: int
    stages: tuple[str, ...] = ()

    def operators(self, *stages: str) -> OrderedStreams:
        """Keyed operators per key in the total order, e.g. ``"delta(value) as change"``.

        Stages as in docs/keyed.md; they need an integer ``sequence`` column.
        """
        return replace(self, stages=self.stages + stages)

    def window(self, size: str, slide: str | None = None) -> WindowedStreams:
        """Epoch-aligned sliding windows (tumbling when ``slide`` is None), e.g. ``"10 s"``."""
        return WindowedStreams(self, size, slide or size)

    def agg(self, *aggregates: str) -> DataFrame:
        """One row per closed session after a closing operator such as ``sessionize(gap)``."""
        return _build(self, self.spec(aggregates))

    def rows(self) -> DataFrame:
        """The rows a row operator last (``delta``, ``dedup``, ...) returns, once released."""
        return _build(self, self.spec(()))

    def spec(self, aggregates: Sequence[str], window: tuple[str, str] | None = None
             ) -> QuerySpec:
        """The runtime query (validated; ConfigError names the argument)."""
        opts = {"aggregates": ", ".join(aggregates), "timestampColumn": self.timestamp,
                "keyColumns": ",".join(self.keys), "outOfOrder": self.out_of_order,
                "partitionGroups": str(self.partition_groups), "operators": "; ".join(
                    self.stages)}
        if window is not None:
            opts |= {"window": window[0], "slide": window[1]}
        return spec_from_options(opts, len(self.inputs))


@dataclass(frozen=True, eq=False)
class WindowedStreams:
    """Windowed ordered inputs; :meth:`agg` gives the result DataFrame."""

    streams: OrderedStreams
    size: str
    slide: str

    def agg(self, *aggregates: str) -> DataFrame:
        """One row per (window, key) with data, once the window closed (called on the driver).

        Columns: ``window_start``, ``window_end`` (timestamps when the event time is one, else long
        ms), the keys, then the aggregates (the aggregate language of docs/aggregates.md, e.g.
        ``"count(*) as n"``, ``"first_where(v, kind = 'alarm') as a"``). Rows of one micro-batch are
        spread over the shuffle partitions; sort by ``(window_end, window_start, keys)`` in the sink
        if order matters.
        """
        if not aggregates:
            raise ConfigError("agg() needs at least one aggregate, e.g. agg('count(*) as n')")
        return _build(self.streams, self.streams.spec(aggregates, (self.size, self.slide)))


def _build(s: OrderedStreams, spec: QuerySpec) -> DataFrame:
    """Tag, union, pack by group, transform, unpack (module doc, transform_wire)."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import BinaryType, StructField, StructType

    packed, arrow_in = packed_inputs(s, spec)
    ts_is_timestamp = pa.types.is_timestamp(arrow_in.field(s.timestamp).type)
    arrow_out = _output_schema(spec, arrow_in, ts_is_timestamp)
    processor = OrderedProcessor(spec, arrow_in, arrow_out, s.sequence, ts_is_timestamp)
    results = packed.groupBy(GROUP).applyInPandasWithState(
        processor, StructType([StructField(RESULTS, BinaryType())]), STATE_SCHEMA, "append",
        GroupStateTimeout.NoTimeout)
    out_struct = StructType([StructField(f.name, from_arrow_type(f.type)) for f in arrow_out])
    windows = results.mapInArrow(functools.partial(unpack, schema=arrow_schema(out_struct)),
                                 out_struct)
    return windows.observe(OBSERVED_OUT, F.count(F.lit(1)).alias("windows_out"))


def packed_inputs(s: OrderedStreams, spec: QuerySpec) -> tuple[DataFrame, pa.Schema]:
    """The inputs tagged, unioned and packed by group, before the operator.

    Returns the packed DataFrame (``_sss_rows``, ``_sss_group``) and the Arrow schema of the
    payload rows it carries. Checks the inputs and the session (ConfigError). Called on the
    driver; ``bench spark`` uses it to measure Spark's own stateful operator on this input.
    """
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

    payload = _read_columns(s, spec, _check_inputs(s))
    _check_session(s.inputs[0].sparkSession)
    arrow_in = arrow_schema(payload)
    ts_is_timestamp = pa.types.is_timestamp(arrow_in.field(s.timestamp).type)
    tagged = [_tagged(df, j) for j, df in enumerate(s.inputs)]
    merged = functools.reduce(lambda a, b: a.unionByName(b), tagged)
    end = F.lit(False) if s.end_of_input is None else F.coalesce(F.col(s.end_of_input),
                                                                  F.lit(False))
    # End-of-input rows reach pack(), which marks their inputs as ended and drops them.
    rows = merged.select(*payload.fieldNames(), F.col(INPUT), end.alias(END))
    # The batch's figures in Spark's progress (progress.observedMetrics; docs/monitoring.md).
    ts_ms = F.unix_millis(F.col(s.timestamp)) if ts_is_timestamp else F.col(s.timestamp)
    data = ~F.col(END)
    seen = F.when(F.col(END), F.lit(EVENT_TIME_MAX)).otherwise(ts_ms)
    rows = rows.observe(OBSERVED_IN, F.count(F.when(data, 1)).alias("rows_in"),
                        F.max(F.when(data, ts_ms)).alias("newest_ts"),
                        F.array(*[F.max(F.when(F.col(INPUT) == j, seen))
                                  for j in range(len(s.inputs))]).alias("input_max"))
    packed = rows.mapInArrow(
        functools.partial(pack, payload=arrow_in, keys=s.keys, n_groups=s.partition_groups,
                          input_column=INPUT, end_column=END, timestamp=s.timestamp,
                          sequence=s.sequence),
        StructType([StructField(ROWS, BinaryType()), StructField(ORDER, BinaryType()),
                    StructField(GROUP, IntegerType())]))
    return packed, arrow_in


def _check_inputs(s: OrderedStreams) -> Any:
    """The payload schema (Spark StructType) after checking inputs and named columns."""
    from pyspark.sql import types as T  # noqa: N812

    if not s.inputs:
        raise ConfigError("ordered() needs at least one input DataFrame")
    schema = s.inputs[0].schema
    for j, df in enumerate(s.inputs):
        if not df.isStreaming:
            raise ConfigError(f"input {j} is not a streaming DataFrame; use spark.readStream")
        if df.schema.simpleString() != schema.simpleString():
            raise ConfigError(f"input {j} has schema {df.schema.simpleString()}, input 0 has "
                              f"{schema.simpleString()}; every input needs the same columns")
    _check_columns(s, {f.name: f.dataType for f in schema.fields})
    return T.StructType([f for f in schema.fields if f.name != s.end_of_input])


def _read_columns(s: OrderedStreams, spec: QuerySpec, payload: Any) -> Any:
    """The payload columns the query reads (Spark then reads only those from its source).

    :meth:`QuerySpec.used_columns` plus ``sequence``: a window query's timestamp, keys and
    aggregated columns; every column for keyed operators (they return them). Fewer columns
    also mean fewer bytes in the rows each group keeps pending in the state store.
    """
    from pyspark.sql import types as T  # noqa: N812
    read = {*spec.used_columns(arrow_schema(payload)), s.sequence}
    return T.StructType([f for f in payload.fields if f.name in read])


def _check_columns(s: OrderedStreams, types: dict[str, Any]) -> None:
    """The named columns exist and have usable types; no reserved names (ConfigError)."""
    from pyspark.sql import types as T  # noqa: N812

    for what, name in [("timestamp", s.timestamp), ("sequence", s.sequence),
                       *[("keys", k) for k in s.keys],
                       *([("end_of_input", s.end_of_input)] if s.end_of_input else [])]:
        if name not in types:
            raise ConfigError(f"{what} column {name!r} not found; columns are {list(types)}")
    if not isinstance(types[s.timestamp], T.LongType | T.TimestampType):
        raise ConfigError(f"timestamp column {s.timestamp!r} is {types[s.timestamp]}; use a "
                          f"long (ms since the epoch) or a timestamp")
    if s.stages and not isinstance(types[s.sequence], T.IntegralType):
        raise ConfigError(f"sequence column {s.sequence!r} is {types[s.sequence]}; keyed "
                          f"operators need an integer position (e.g. a Kafka offset)")
    if s.end_of_input and not isinstance(types[s.end_of_input], T.BooleanType):
        raise ConfigError(f"end_of_input column {s.end_of_input!r} must be boolean")
    ntz = [n for n, t in types.items() if isinstance(t, T.TimestampNTZType)]
    if ntz:
        raise ConfigError(f"columns {ntz} are timestamp_ntz; cast them to timestamp (UTC)")
    clash = {INPUT, END, GROUP, ROWS, ORDER, RESULTS} & set(types)
    if clash:
        raise ConfigError(f"column names {sorted(clash)} are reserved by ordered()")


def _check_session(spark: SparkSession) -> None:
    """The RocksDB state store, workers that import the package (ConfigError)."""
    provider = spark.conf.get(PROVIDER_CONF, None) or ""
    if provider != ROCKSDB_PROVIDER:
        raise ConfigError(
            f"ordered() keeps its state in Spark's state store and needs {PROVIDER_CONF}="
            f"{ROCKSDB_PROVIDER} (now {provider or 'unset'}); call "
            f"spark_stream_sched.spark.transform.configure(spark) before defining the query")
    check_workers_python(spark)


def _output_schema(spec: QuerySpec, arrow_in: pa.Schema, ts_is_timestamp: bool) -> pa.Schema:
    """The result's Arrow schema (window bounds as timestamps when the event time is one)."""
    group = spec.build_group(arrow_in)
    schema: pa.Schema = group.public_schema if isinstance(group, Pipeline) else (
        group.output_schema)
    if ts_is_timestamp:
        for name in BOUND_COLUMNS:
            if name in schema.names:
                schema = schema.set(schema.get_field_index(name), pa.field(name, SPARK_TIMESTAMP))
    return schema


def _tagged(df: DataFrame, j: int) -> DataFrame:
    """Input ``j`` with its id, in one partition per micro-batch.

    pack() checks the input's rows along the sequence there, all of them together, and sums
    them up for every group (runtime/engine/sequence_order.py).
    """
    from pyspark.sql import functions as F  # noqa: N812

    return df.withColumn(INPUT, F.lit(j).cast("int")).coalesce(1)
