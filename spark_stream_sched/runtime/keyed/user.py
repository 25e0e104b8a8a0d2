"""``udf(package.module:function)``: a user function applied per key with JSON state.

The user writes a partitioned stateful operator (Prasaad et al. 2018, §2.1) as a plain function::

    from spark_stream_sched.runtime.keyed.user import keyed_function

    @keyed_function(output_schema=pa.schema([("alarm_kwh", pa.float64())]),
                    initial_state={"total": 0.0})
    def alarms(key: tuple, rows: pa.Table, state: dict) -> pa.Table | None:
        ...

and names it in a stage: ``udf(mypkg.alarms:alarms)``. Contract:

* **Calls.** Each :meth:`UserFunction.update` calls the function once per key present in the
  released rows, with ``key`` (the tuple of the key columns' values, ``()`` without key
  columns), ``rows`` (that key's tuples of this update in the total order ``(ts, input, seq)``,
  every input column included) and ``state``. How rows are cut into calls depends on the ready
  bound, so a function whose output must be deterministic must give, for rows ``A + B``, what it
  gives for ``A`` then ``B`` with the state carried between them.
* **State.** ``state`` is the key's dict, starting as a copy of ``initial_state``. The function
  mutates it in place (its return value is the output rows, never the state). After each call the
  state is stored as JSON text and the next call gets it back decoded, so a function sees exactly
  the same state whether or not the operator was snapshotted and restored in between (tuples come
  back as lists, dict keys as strings). A state that is not a JSON-serialisable dict raises
  :class:`~spark_stream_sched.errors.StateError` naming the function and the key. The states of a
  call's keys are committed only when every call of the update succeeded.
* **Output.** The function returns ``None`` or a :class:`pyarrow.Table` whose columns are
  exactly ``output_schema`` (names and types, in order), optionally plus an integer column
  ``__row`` (:data:`ROW_COL`): for each output row, the 0-based index in ``rows`` of the tuple
  that produced it. Without ``__row`` every row is attributed to the call's last tuple. The
  operator returns, per output row, the ts, ``__input``, ``__seq`` and key columns of its
  producing tuple followed by the function's columns, sorted by the producing tuple's position
  in the total order (a call's rows keep their order), so outputs leave in the order of the
  inputs that produced them (output ordering, Prasaad et al. (2018), §3). It is a row operator
  (``emits_rows``: its rows are in the total order and can feed later stages or a window), with
  one difference from the built-ins: it passes on only those columns, not every input column,
  and a tuple may produce zero or several rows. A function that attributes each output row to
  the tuple it describes (``__row``) and carries everything else in ``state`` gives the same
  result however the rows are cut into calls.
* **Errors.** A wrong result (not a table, other columns or types, ``__row`` out of range) and
  any exception raised by the function become :class:`~spark_stream_sched.errors.InputError`
  naming the function, the key and the input positions ``(input, seq)`` of the first and last
  rows it was given (the function's exception is chained).
* **Import path** and **snapshots**: the path's shape and the module's source are checked
  before it is imported (:mod:`~spark_stream_sched.runtime.keyed.user_path`); a snapshot stores
  the path, never the function, and is restored only for the stage the query defines
  (:meth:`UserFunction.restore_stage`), refused (StateError) if ``output_schema`` changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError, InputError, StateError, schema_line
from spark_stream_sched.runtime.keyed import user_path
from spark_stream_sched.runtime.keyed.base import KeyedOperator, check_stage, register
from spark_stream_sched.runtime.keyed.groups import (
    STATE_FORMAT,
    KeyGroups,
    check_format,
    column,
    key_fields,
    lookup,
    merge_state,
    take,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.state.snapshot import decode, encode

#: Optional output column: index in ``rows`` of the tuple that produced each output row.
ROW_COL = "__row"

UserCallable = Callable[[tuple[Any, ...], pa.Table, dict[str, Any]], pa.Table | None]


@dataclass(frozen=True)
class KeyedFunction:
    """A user function with its output schema and initial state (made by :func:`keyed_function`).

    Calling it calls the function; ``initial_state`` is kept as JSON text.
    """

    function: UserCallable
    output_schema: pa.Schema
    initial_state: str

    def __call__(self, key: tuple[Any, ...], rows: pa.Table,
                 state: dict[str, Any]) -> pa.Table | None:
        """Call the user function."""
        return self.function(key, rows, state)


def keyed_function(output_schema: pa.Schema, initial_state: dict[str, Any] | None = None
                   ) -> Callable[[UserCallable], KeyedFunction]:
    """Decorator declaring a per-key user function (contract in the module docstring).

    Raises
    ------
    ConfigError
        When ``output_schema`` is not a schema or uses a name starting with ``__``, or
        ``initial_state`` is not a JSON-serialisable dict.
    """
    if not isinstance(output_schema, pa.Schema):
        raise ConfigError(f"keyed_function: output_schema must be a pyarrow.Schema, got "
                          f"{type(output_schema).__name__}")
    reserved = [name for name in output_schema.names if name.startswith("__")]
    if reserved:
        raise ConfigError(f"keyed_function: output columns {reserved} start with '__', which "
                          f"is reserved for the runtime; rename them")
    state = {} if initial_state is None else initial_state
    try:
        text = _dumped(state)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"keyed_function: initial_state must be a JSON-serialisable dict "
                          f"({exc})") from exc

    def wrap(function: UserCallable) -> KeyedFunction:
        return KeyedFunction(function, output_schema, text)
    return wrap


def _dumped(state: object) -> str:
    if not isinstance(state, dict):
        raise TypeError(f"the state is a {type(state).__name__}, not a dict")
    return json.dumps(state, sort_keys=True)


def load_function(path: str) -> KeyedFunction:
    """The keyed function ``package.module:function`` names, checked before any import."""
    target = user_path.load_function(path)
    if not isinstance(target, KeyedFunction):
        raise ConfigError(f"{path!r} is not decorated with @keyed_function")
    return target


@register
class UserFunction(KeyedOperator):
    """``udf(package.module:function)`` (contract in the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: not exactly one import path, an alias or keyword, a function that
        cannot be imported or is not a keyed function, unknown key or ts columns, or output
        columns that clash with the ts and key columns.
    """

    name = "udf"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        if len(stage.args) != 1 or stage.kwargs or stage.alias:
            raise stage.fail("expected one import path: udf(package.module:function)")
        self.path = stage.args[0]
        try:
            self.function = load_function(self.path)
        except ConfigError as exc:
            raise stage.fail(str(exc)) from exc
        carried = [ts_column, INPUT_COL, SEQ_COL, *key_columns]
        for name in carried:
            if name not in input_schema.names:
                raise stage.fail(f"unknown column {name!r}; columns are {input_schema.names}")
        clash = sorted(set(carried) & set(self.function.output_schema.names))
        if clash:
            raise stage.fail(f"output columns {clash} of {self.path!r} clash with the ts and "
                             f"key columns the operator adds; rename them")
        self._carried = list(dict.fromkeys(carried))
        self._schema = pa.schema([input_schema.field(n) for n in self._carried]
                                 + list(self.function.output_schema))
        self._states = pa.schema([*key_fields(input_schema, key_columns),
                                  ("state", pa.string())]).empty_table()

    @property
    def output_schema(self) -> pa.Schema:
        """Producing tuple's ts, ``__input``, ``__seq`` and key columns, then the function's."""
        return self._schema

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Call the function once per key of ``rows``; return its rows in producing order."""
        groups = KeyGroups.of(rows, self.key_columns)
        slot = lookup(self._states, groups)
        carried = take(column(self._states, "state"), slot).to_pylist()
        outputs, producers, states = [], [], []
        for g in range(len(groups)):  # one call per distinct key, as the contract says
            index = groups.rows(g)
            part = rows.take(pa.array(index))
            key = tuple(part.column(name)[0].as_py() for name in self.key_columns)
            state = json.loads(carried[g] if slot[g] >= 0 else self.function.initial_state)
            output, produced_by = self._call(key, part, state)
            states.append(self._stored(key, state))
            outputs.append(output)
            producers.append(index[produced_by])
        if states:
            new = groups.keys.append_column("state", pa.array(states, pa.string()))
            self._states = merge_state(self._states, new, slot[slot >= 0])
        if not outputs:
            return self._schema.empty_table()
        producer = np.concatenate(producers)
        order = np.argsort(producer, kind="stable")
        table = pa.concat_tables(outputs).take(pa.array(order))
        head = rows.select(self._carried).take(pa.array(producer[order]))
        return pa.Table.from_arrays(head.columns + table.columns, schema=self._schema)

    def _where(self, key: tuple[Any, ...], part: pa.Table) -> str:
        first, last = part.slice(0, 1).to_pylist()[0], part.slice(part.num_rows - 1).to_pylist()[0]
        return (f"keyed function {self.path!r} for key {key!r} on the rows at input positions "
                f"(input {first[INPUT_COL]}, seq {first[SEQ_COL]}) .. "
                f"(input {last[INPUT_COL]}, seq {last[SEQ_COL]})")

    def _call(self, key: tuple[Any, ...], part: pa.Table,
              state: dict[str, Any]) -> tuple[pa.Table, np.ndarray]:
        """The function's rows (cast to its schema) and the index in ``part`` producing each."""
        try:
            result = self.function(key, part, state)
        except Exception as exc:  # re-raised with the key and positions, never swallowed
            raise InputError(f"{self._where(key, part)} raised {type(exc).__name__}: "
                             f"{exc}") from exc
        expected = self.function.output_schema
        if result is None:
            return expected.empty_table(), np.zeros(0, dtype=np.int64)
        if not isinstance(result, pa.Table):
            raise InputError(f"{self._where(key, part)} returned a {type(result).__name__}; "
                             f"return a pyarrow.Table of {schema_line(expected)} or None")
        produced_by = np.full(result.num_rows, part.num_rows - 1, dtype=np.int64)
        if ROW_COL in result.column_names:
            rows = result.column(ROW_COL)
            if (not pa.types.is_integer(rows.type) or rows.null_count
                    or not all(0 <= r < part.num_rows for r in rows.to_pylist())):
                raise InputError(f"{self._where(key, part)} returned a {ROW_COL!r} column that "
                                 f"is not a non-null integer index into its {part.num_rows} rows")
            produced_by = np.asarray(rows.to_numpy(), dtype=np.int64)
            result = result.drop_columns([ROW_COL])
        got = [(f.name, f.type) for f in result.schema]
        if got != [(f.name, f.type) for f in expected]:
            raise InputError(f"{self._where(key, part)} returned other columns than its "
                             f"output_schema: return its columns, in its order and types; it "
                             f"returned {schema_line(result.schema)}, output_schema is "
                             f"{schema_line(expected)}")
        return result.cast(expected), produced_by

    def _stored(self, key: tuple[Any, ...], state: object) -> str:
        try:
            return _dumped(state)
        except (TypeError, ValueError) as exc:
            raise StateError(f"keyed function {self.path!r}: the state of key {key!r} cannot be "
                             f"stored as JSON ({exc}); keep only dicts, lists, strings, numbers, "
                             f"booleans and None in it") from exc

    def snapshot(self) -> bytes:
        """The import path, schemas and every key's state as JSON text (never pickle)."""
        tables = {
            "__schema": self.input_schema.empty_table(),
            "__output": self.function.output_schema.empty_table(),
            "udf": self._states,
        }
        meta = {"path": self.path, "keys": self.key_columns, "ts": self.ts_column,
                "format": STATE_FORMAT}
        return encode("keyed.udf", meta, tables)

    @classmethod
    def restore_stage(cls, data: bytes, stage: StageSpec) -> KeyedOperator:
        """Restore ``stage``; StateError before any import if the snapshot names another one."""
        meta, _ = decode(data, "keyed.udf")
        check_stage(StageSpec(cls.name, (str(meta.get("path")),)), stage)
        return cls.restore(data)

    @classmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        """Import the function the snapshot names; adopt the states (StateError if unfit).

        A query restores through :meth:`restore_stage`, which checks the name first.
        """
        meta, tables = decode(data, "keyed.udf")
        check_format(meta, cls.name)
        try:
            op = cls(StageSpec(cls.name, (str(meta["path"]),)), tables["__schema"].schema,
                     list(meta["keys"]), str(meta["ts"]))
            if not tables["__output"].schema.equals(op.function.output_schema):
                raise StateError(f"the output_schema of {op.path!r} changed since the snapshot "
                                 f"was taken; restore with the function it was written by")
            if not tables["udf"].schema.equals(op._states.schema):
                raise StateError("the per-key state table has another schema than the query's "
                                 "key columns give")
            op._states = tables["udf"]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"snapshot of operator 'udf' does not match its format ({exc})"
                             ) from exc
        return op

    @property
    def state_bytes(self) -> int:
        """Bytes of JSON state held."""
        return int(pc.sum(pc.binary_length(self._states.column("state"))).as_py() or 0)
