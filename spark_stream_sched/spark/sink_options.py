"""Options of the ``ordered-agg`` sink: parsing, validation, the stream's columns (no pyspark).

:class:`SinkConfig` is what the writer ships to executors; see
:mod:`spark_stream_sched.spark.sink` for the option table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.query import OrderedAggregation, QuerySpec, spec_from_options
from spark_stream_sched.runtime.query.names import normalise_options, one_name, query_required
from spark_stream_sched.runtime.query.spec import SpecView
from spark_stream_sched.spark.options import int_option
from spark_stream_sched.spark.sink_groups import Wiring

#: Canonical sink option names; Spark passes them lower-cased.
SINK_OPTION_NAMES: tuple[str, ...] = (
    "path", "inputs", "inputColumn", "timestampColumn", "keyColumns", "window", "slide",
    "aggregates", "outOfOrder", "stateLocation", "checkpointLocation", "sequenceColumn",
    "endOfInputColumn", "keepVersions", "queryName", "where", "operators", "partitionGroups",
)
SINK_REQUIRED = ("path", "inputs", "window", "aggregates")


# -- options -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkConfig(SpecView):
    """The validated options of one ``ordered-agg`` sink (picklable, immutable).

    ``spec`` is what the query computes (the same :class:`QuerySpec` the source, job configs
    and the CLI build); the other fields wire Spark's rows to it and say where results go.
    """

    spec: QuerySpec
    path: str
    input_column: str
    state_location: str
    sequence_column: str | None
    end_column: str | None
    keep_versions: int
    checkpoint_location: str | None = None

    def wiring(self) -> dict[str, str | None]:
        """Options besides the spec that are fixed for a stateLocation (named as written)."""
        return {"inputColumn": self.input_column, "sequenceColumn": self.sequence_column,
                "endOfInputColumn": self.end_column}

    def fingerprint(self) -> str:
        """The query's fingerprint (:meth:`QuerySpec.fingerprint`; wiring is recorded apart)."""
        return self.spec.fingerprint()

    def wiring_view(self) -> Wiring:
        """What the per-group work needs (shipped to executors inside the writer)."""
        return Wiring(self.spec, self.state_location, self.input_column, self.sequence_column,
                      self.end_column)


def _state_location(opts: Mapping[str, str]) -> str:
    if opts.get("stateLocation", "").strip():
        return opts["stateLocation"].strip()
    if opts.get("checkpointLocation", "").strip():
        return str(Path(opts["checkpointLocation"].strip()) / "ordered-agg-sink")
    raise ConfigError("the ordered-agg sink needs option stateLocation or a checkpointLocation "
                      "(.option('checkpointLocation', ...)) to keep its state")


def parse_sink_options(options: Mapping[str, str]) -> SinkConfig:
    """Parse and validate the sink options (keys in any case).

    Raises
    ------
    ConfigError
        Unknown option (with a suggestion), missing required option or malformed value.

    Notes
    -----
    Called on the driver. Column checks against the stream's schema happen in
    :func:`make_stream_writer`.
    """
    opts = normalise_options(options, SINK_OPTION_NAMES, query_required(SINK_REQUIRED, options),
                             "ordered-agg sink")
    seq = opts.get("sequenceColumn", "").strip()
    end = opts.get("endOfInputColumn", "").strip()
    return SinkConfig(
        spec=spec_from_options(opts, int_option("inputs", opts["inputs"], 1)),
        path=opts["path"].strip(),
        input_column=one_name("inputColumn", opts.get("inputColumn", "input")),
        state_location=_state_location(opts),
        sequence_column=one_name("sequenceColumn", seq) if seq else None,
        end_column=one_name("endOfInputColumn", end) if end else None,
        keep_versions=int_option("keepVersions", opts.get("keepVersions", "10"), 1),
        checkpoint_location=opts.get("checkpointLocation", "").strip() or None,
    )


def check_schema(config: SinkConfig, schema: pa.Schema) -> None:
    """Check the stream's columns against the options; ConfigError naming what is wrong.

    Notes
    -----
    Called on the driver when the query starts, so a bad column fails at ``start()``.
    """
    def field(name: str, option: str) -> pa.Field:
        if name not in schema.names:
            raise ConfigError(f"option {option}={name!r}: no such column in the stream; "
                              f"columns are {schema.names}")
        return schema.field(name)

    if not pa.types.is_integer(field(config.input_column, "inputColumn").type):
        raise ConfigError(f"option inputColumn={config.input_column!r}: the input id must be an "
                          f"integer column, got {schema.field(config.input_column).type}")
    if config.end_column is not None and not pa.types.is_boolean(
            field(config.end_column, "endOfInputColumn").type):
        raise ConfigError(f"option endOfInputColumn={config.end_column!r} must be a boolean "
                          f"column")
    if config.sequence_column is not None:
        field(config.sequence_column, "sequenceColumn")
    # Building the operator checks the timestamp, key and aggregate columns.
    _new_query(config, runtime_schema(config, schema))


def runtime_schema(config: SinkConfig, schema: pa.Schema) -> pa.Schema:
    """Return the schema of the rows given to the runtime (no input-id/end/sequence columns)."""
    drop = {config.input_column, config.end_column, config.sequence_column}
    return pa.schema([f for f in schema if f.name not in drop])


def _new_query(config: SinkConfig, schema: pa.Schema) -> OrderedAggregation:
    return config.spec.build(schema)
