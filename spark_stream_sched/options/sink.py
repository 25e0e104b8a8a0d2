"""Options of the ``ordered-agg`` sink: parsing, validation, the stream's columns (no pyspark).

They become a :class:`~spark_stream_sched.runtime.engine.sink_config.SinkConfig`, what the writer
ships to executors; see :mod:`spark_stream_sched.spark.sink` for the option table.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.options.source import (
    MAX_KEEP,
    int_option,
    keep_option,
    parse_duration,
    spill_option,
)
from spark_stream_sched.options.table import option_names
from spark_stream_sched.runtime.engine.sink_config import SinkConfig
from spark_stream_sched.runtime.names import normalise_options, one_name, query_required
from spark_stream_sched.runtime.query import spec_from_options

#: Canonical sink option names (declared in :mod:`.table`); Spark passes them lower-cased.
SINK_OPTION_NAMES: tuple[str, ...] = option_names("sink")
#: Inputs of one sink query (each has per-input figures in every commit marker).
MAX_INPUTS = 10_000
SINK_REQUIRED = ("path", "inputs", "window", "aggregates")


# -- options -----------------------------------------------------------------------------------


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
        spec=spec_from_options(opts, int_option("inputs", opts["inputs"], 1, MAX_INPUTS)),
        path=opts["path"].strip(),
        input_column=one_name("inputColumn", opts.get("inputColumn", "input")),
        state_location=_state_location(opts),
        sequence_column=one_name("sequenceColumn", seq) if seq else None,
        end_column=one_name("endOfInputColumn", end) if end else None,
        keep_versions=int_option("keepVersions", opts.get("keepVersions", "10"), 1, MAX_KEEP),
        keep_metrics=keep_option(opts),
        checkpoint_location=opts.get("checkpointLocation", "").strip() or None,
        idle_timeout_ms=(parse_duration("idleTimeout", opts["idleTimeout"])
                         if opts.get("idleTimeout", "").strip() else None),
        spill_location=spill_option(opts),
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
    config.spec.build(config.runtime_schema(schema))
