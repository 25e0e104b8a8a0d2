"""What the ``ordered-agg`` sink's steps need to know of its options (picklable, no pyspark).

:class:`SinkConfig` is built once on the driver from the Spark options
(:func:`spark_stream_sched.options.sink.parse_sink_options`) and shipped inside the writer to
every write task: the query (:class:`~spark_stream_sched.runtime.query.spec.QuerySpec`), where
results and state go, and how Spark's rows map onto the runtime's (the input-id column, the
sequence column that orders one input's rows, the end-of-input column).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from spark_stream_sched.runtime.query.spec import QuerySpec, SpecView
from spark_stream_sched.runtime.state.batch_metrics import KEEP_BATCHES

#: Column of staged results naming the partition group that produced a row.
GROUP_COL = "__group"


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
                "endOfInputColumn": self.end_column}

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
