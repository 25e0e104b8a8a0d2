"""Runtime implementations of plan operators on Arrow packets (stateless ones here).

:func:`~.build.build_operator` turns a :class:`~spark_stream_sched.runtime.plan.OperatorDef` into
a :class:`RuntimeOperator` for a known input schema. ``params`` of each kind:

=====================  =====================================================================
``select``/``filter``  ``predicate``: text of the safe predicate language (``runtime/expr``)
``project``            ``columns``: list of column names to keep, in output order
``map``                ``column`` + ``function`` (a pyarrow.compute name from
                       :data:`MAP_FUNCTIONS`) + ``args`` (str: column, number/bool: literal);
                       or ``fn``: a Python callable ``pa.Table -> pa.Table``
``window_aggregate``   ``size``, ``slide`` (durations), ``keys``, ``aggregates``, ``ts``
``keyed``              ``keys``, ``function`` (``running_count``/``running_sum``), ``column``,
                       ``output``
=====================  =====================================================================

Every kind also accepts ``work``: extra vectorised passes per tuple that emulate a costlier operator
in benchmarks (results are unchanged). Stateless operators (Prasaad et al. 2018, §6) may run on
several packets at once; order-sensitive ones (``ordered = True``, :mod:`.stateful`) see their
packets strictly in sequence and may keep state. A user ``fn`` must be row-wise (each output row
depends on one input row only), or results would depend on packet boundaries.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.operators import OperatorDef
from spark_stream_sched.runtime.predicate import Predicate

#: pyarrow.compute functions a declarative ``map`` may call (element-wise, deterministic).
MAP_FUNCTIONS = frozenset({
    "add", "subtract", "multiply", "divide", "negate", "abs", "sqrt", "power", "floor",
    "ceil", "round", "bit_wise_and", "bit_wise_xor", "shift_left", "shift_right", "utf8_upper",
    "utf8_lower", "utf8_length", "if_else", "greater", "less", "equal", "cast",
})


def burn(rows: int, work: int) -> None:
    """Spend about ``work`` vectorised passes over ``rows`` values (synthetic operator cost)."""
    if work <= 0 or rows <= 0:
        return
    x = np.arange(rows, dtype=np.float64)
    for _ in range(work):
        np.sqrt(x + 1.0, out=x)


class RuntimeOperator(ABC):
    """An operator that turns input packets (Arrow tables) into output packets.

    Attributes
    ----------
    op_id
        The plan operator it implements.
    ordered
        Order-sensitive: the engine feeds it packets strictly in sequence, one at a time.
    input_schema, output_schema
        Schemas of its input and output packets.
    """

    ordered = False

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema) -> None:
        self.op_id = definition.op_id
        self.params: Mapping[str, Any] = definition.params
        self.work = int(self.params.get("work", 0))
        self.input_schema = input_schema
        self.output_schema = input_schema

    @abstractmethod
    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Process one packet; return the output packet (possibly empty)."""

    def process(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """:meth:`apply` plus the synthetic ``work``."""
        burn(table.num_rows, self.work)
        return self.apply(table, watermark)

    def finish(self) -> pa.Table | None:
        """End of input: return a last output packet, or ``None`` (stateless operators)."""
        return None

    def param(self, name: str) -> Any:
        """Return a required parameter or raise :class:`ConfigError` naming the operator."""
        if name not in self.params:
            raise ConfigError(f"operator {self.op_id!r} needs the parameter {name!r}")
        return self.params[name]

    def _probe_schema(self) -> pa.Schema:
        """Output schema found by running :meth:`apply` on an empty packet."""
        return self.apply(self.input_schema.empty_table(), None).schema


class FilterOperator(RuntimeOperator):
    """``select``/``filter``: keep the rows whose predicate is true (null counts as false)."""

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema) -> None:
        super().__init__(definition, input_schema)
        self.predicate = Predicate.compile(str(self.param("predicate")), input_schema)

    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Return the rows that satisfy the predicate, in order."""
        if table.num_rows == 0:
            return table
        return table.filter(pa.array(self.predicate.evaluate(table), type=pa.bool_()))


class ProjectOperator(RuntimeOperator):
    """``project``: keep the listed columns."""

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema) -> None:
        super().__init__(definition, input_schema)
        columns = self.param("columns")
        missing = [c for c in columns if c not in input_schema.names]
        if missing:
            raise ConfigError(f"operator {self.op_id!r} projects unknown columns {missing}; "
                              f"columns are {input_schema.names}")
        self.columns = [str(c) for c in columns]
        self.output_schema = self._probe_schema()

    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Return the selected columns (zero-copy)."""
        return table.select(self.columns)


class MapOperator(RuntimeOperator):
    """``map``: a vectorised expression into ``column``, or a user function on the packet."""

    def __init__(self, definition: OperatorDef, input_schema: pa.Schema) -> None:
        super().__init__(definition, input_schema)
        fn = self.params.get("fn")
        self.fn: Callable[[pa.Table], pa.Table] = fn if callable(fn) else self._declared()
        self.output_schema = self._probe_schema()

    def _declared(self) -> Callable[[pa.Table], pa.Table]:
        column, name = str(self.param("column")), str(self.param("function"))
        if name not in MAP_FUNCTIONS:
            raise ConfigError(f"operator {self.op_id!r}: map function {name!r} is not allowed; "
                              f"use one of {sorted(MAP_FUNCTIONS)} or pass 'fn'")
        args = list(self.params.get("args", []))
        for a in args:
            if isinstance(a, str) and a not in self.input_schema.names:
                raise ConfigError(f"operator {self.op_id!r}: unknown column {a!r} in args")
        options = self.params.get("options")

        def expression(table: pa.Table) -> pa.Table:
            values = [table.column(a) if isinstance(a, str) else a for a in args]
            result = pc.call_function(name, values, options)
            return _assign(table, column, result)

        return expression

    def apply(self, table: pa.Table, watermark: int | None) -> pa.Table:
        """Apply the expression or the user function."""
        return self.fn(table)


def _assign(table: pa.Table, column: str, values: Any) -> pa.Table:
    if column in table.column_names:
        return table.set_column(table.column_names.index(column), column, values)
    return table.append_column(column, values)
