"""The one factory of the executor's operators: an operator definition -> a runtime operator."""

from __future__ import annotations

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.executor.operators import (
    FilterOperator,
    MapOperator,
    ProjectOperator,
    RuntimeOperator,
)
from spark_stream_sched.runtime.executor.stateful import KeyedOperator, WindowOperator
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind


def build_operator(
    definition: OperatorDef, input_schema: pa.Schema, ts_column: str = "ts"
) -> RuntimeOperator:
    """Create the runtime operator of ``definition`` for packets of ``input_schema``.

    Raises
    ------
    ConfigError
        Unsupported kind (``join``, ``sink``), missing or bad parameters.
    """
    kind = definition.kind
    if kind in (OperatorKind.SELECT, OperatorKind.FILTER):
        return FilterOperator(definition, input_schema)
    if kind is OperatorKind.PROJECT:
        return ProjectOperator(definition, input_schema)
    if kind is OperatorKind.MAP:
        return MapOperator(definition, input_schema)
    if kind is OperatorKind.WINDOW_AGGREGATE:
        return WindowOperator(definition, input_schema, ts_column)
    if kind is OperatorKind.KEYED:
        return KeyedOperator(definition, input_schema)
    raise ConfigError(f"operator {definition.op_id!r}: the executor cannot run kind "
                      f"{kind.value!r} yet; use select, filter, project, map, "
                      f"window_aggregate or keyed")
