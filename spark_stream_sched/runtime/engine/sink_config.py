"""What the ``ordered-agg`` sink's steps need to know of its options (picklable, no pyspark).

:class:`SinkConfig` is built once on the driver from the Spark options
(:func:`spark_stream_sched.options.sink.parse_sink_options`) and shipped inside the writer to
every write task: the query (:class:`~spark_stream_sched.runtime.query.spec.QuerySpec`), where
results and state go, and how Spark's rows map onto the runtime's (the input-id column, the
sequence column that orders one input's rows, the end-of-input column).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.distribution.murmur3 import murmur3_hashable
from spark_stream_sched.runtime.query.recorded import recorded_query
from spark_stream_sched.runtime.query.spec import QuerySpec, SpecView
from spark_stream_sched.runtime.state.batch_metrics import KEEP_BATCHES

#: Column of staged results naming the partition group that produced a row.
GROUP_COL = "__group"
#: The wiring entry naming the state's partition-group function (``_query.json``).
GROUP_FUNCTION = "groupFunction"


@dataclass(frozen=True)
class SinkConfig(SpecView):
    """The validated options of one ``ordered-agg`` sink (picklable, immutable).

    ``spec`` is what the query computes (the same spec the source, job configs and the CLI
    build); the other fields wire Spark's rows to it and say where results go.
    ``idle_timeout_ms``: an input with no row for that long (wall-clock, on the driver) stops
    holding the ready bound back (None: never). ``keep_metrics``: commit markers kept (at
    least the last ``keep_versions``). ``spill_location``: where join stages spill (None: the
    system temp directory).
    """

    spec: QuerySpec
    path: str
    input_column: str
    state_location: str
    sequence_column: str | None
    end_column: str | None
    keep_versions: int
    checkpoint_location: str | None = None
    idle_timeout_ms: int | None = None
    keep_metrics: int = KEEP_BATCHES
    spill_location: str | None = None

    def wiring(self) -> dict[str, str | None]:
        """Options besides the spec that are fixed for a stateLocation (named as written)."""
        return {"inputColumn": self.input_column, "sequenceColumn": self.sequence_column,
                "endOfInputColumn": self.end_column, GROUP_FUNCTION: self.spec.group_function}

    def fingerprint(self) -> str:
        """The query's fingerprint (:meth:`QuerySpec.fingerprint`; wiring is recorded apart)."""
        return self.spec.fingerprint()

    def runtime_schema(self, schema: pa.Schema) -> pa.Schema:
        """The columns the operators see (no input-id, end, sequence or group column)."""
        drop = {self.input_column, self.end_column, self.sequence_column, GROUP_COL}
        return pa.schema([f for f in schema if f.name not in drop])

    def stream_columns(self, schema: pa.Schema) -> list[str]:
        """The stream's columns the sink uses, in the stream's order.

        The query's (:meth:`QuerySpec.used_columns` of :meth:`runtime_schema`: every column
        when it has keyed operators) and the input-id, sequence and end-of-input columns.
        Without a sequence column every column: rows of one input with equal event times are
        then ordered by all their other columns (``sink_rows.prepare``).
        """
        if self.sequence_column is None:
            return list(schema.names)
        used = {*self.spec.used_columns(self.runtime_schema(schema)), self.input_column,
                self.sequence_column, self.end_column}
        return [name for name in schema.names if name in used]


def with_group_function(config: SinkConfig, schema: pa.Schema | None = None) -> SinkConfig:
    """``config`` with the partition-group function of its state location.

    A location keeps the function it started with: the one its ``_query.json`` names, or
    ``splitmix64`` for a record written before sinks recorded one. A fresh location gets
    ``murmur3`` (Spark's own ``hash``, so ``partition_for_sink`` routes rows in one native
    expression) when ``schema`` is given and every key column has that mirror
    (:func:`~spark_stream_sched.runtime.distribution.murmur3.murmur3_hashable`), else
    ``splitmix64``. Called on the driver; the result is what the writer ships to its tasks.
    """
    function = recorded_group_function(config.state_location)
    if function is None:
        keys = config.spec.key_columns
        native = schema is not None and all(
            k in schema.names and murmur3_hashable(schema.field(k).type) for k in keys)
        function = "murmur3" if native else "splitmix64"
    return replace(config, spec=replace(config.spec, group_function=function))


def recorded_group_function(location: str) -> str | None:
    """The partition-group function of the sink state in ``location`` (None: a fresh one)."""
    record = recorded_query(location)
    return None if record is None else str(record.get("wiring", {}).get(GROUP_FUNCTION,
                                                                          "splitmix64"))


def check_group_function(config: SinkConfig) -> None:
    """StateError unless ``config`` groups keys as the state in its location does."""
    recorded = recorded_group_function(config.state_location)
    if recorded not in (None, config.spec.group_function):
        raise StateError(
            f"ordered-agg sink: the state in {config.state_location!r} puts keys in partition "
            f"groups by {recorded}, but this writer would use {config.spec.group_function}; "
            f"build the writer's options with with_group_function (make_stream_writer does)")
