"""The contract of a keyed operator (a partitioned stateful operator) and its registry.

Prasaad et al. (2018), §2.


A keyed operator sees the tuples of each key in the total order ``(ts, input, seq)`` and keeps state
per key. One instance holds the state of every key of one partition group (Liu & Rundensteiner
2005), so the Spark source versions it with the group's other state, and the executor's hybrid queue
(Prasaad et al. 2018, §4.3) may run different keys of one instance on different workers.

Contract of :meth:`KeyedOperator.update` (the same as
:meth:`~spark_stream_sched.runtime.window.aggregator.WindowAggregator.update`):

* ``rows`` hold, in the total order, every tuple of the operator's keys with ``ts < bound`` not
  given before; they carry the ts column, the key columns, the columns the operator reads and
  the internal ``__input`` / ``__seq`` columns (:data:`~..packets.INPUT_COL`,
  :data:`~..packets.SEQ_COL`); other columns pass through untouched;
* ``bound`` is the ready bound ``R`` after these rows (``None``: not known yet); bounds never
  decrease; every later tuple has ``ts >= bound``;
* a *row operator* (``emits_rows``) returns one row per input tuple it keeps, in input order,
  with every input column (``__input``/``__seq`` included) followed by the columns it adds;
  a *closing operator* (sessions) returns the groups that ``bound`` proves closed;
* :meth:`finish` is called once at end of input and returns what is still open;
* :meth:`snapshot` bytes come from :func:`~spark_stream_sched.runtime.state.snapshot.encode`
  (checksummed, never pickle) and :meth:`restore` rebuilds an equal operator in any process.

The result of any sequence of calls depends only on the concatenated rows and the final bound,
never on how the rows were cut into calls (tested for every operator with Hypothesis).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, TypeVar

import pyarrow as pa

from spark_stream_sched.errors import ConfigError, StateError
from spark_stream_sched.runtime.keyed.stage import REGISTRY, StageSpec, operator_names


class KeyedOperator(ABC):
    """Base class of the operators a pipeline stage names (see the module docstring).

    Parameters
    ----------
    stage
        The parsed stage (arguments checked by the subclass; errors via ``stage.fail``).
    input_schema
        Schema of the rows :meth:`update` receives (``__input``/``__seq`` included).
    key_columns
        The query's key columns (may be empty: one key for the whole stream).
    ts_column
        Event-time column (int64 ms).
    aggregates
        The query's aggregate list in canonical text; only closing operators use it.
    """

    #: Stage name users write (``"delta"``).
    name: ClassVar[str]
    #: True for operators that return input rows (plus columns); False for closing operators.
    emits_rows: ClassVar[bool] = True
    #: The query's hold bound for this update (set by the pipeline; only a join uses it: it
    #: holds back its results at or above it, as it does for its own missing results).
    hold_cap: int | None = None

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        self.stage = stage
        self.input_schema = input_schema
        self.key_columns = list(key_columns)
        self.ts_column = ts_column
        self.aggregates = aggregates

    @property
    @abstractmethod
    def output_schema(self) -> pa.Schema:
        """Schema of every table :meth:`update` and :meth:`finish` return."""

    @abstractmethod
    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Consume the next released rows; return the outputs they (and ``bound``) produce."""

    @classmethod
    def check_query_inputs(cls, stage: StageSpec, n_inputs: int) -> None:
        """ConfigError naming ``stage`` if it cannot work over a query of ``n_inputs`` inputs.

        Called when a query is defined; most operators read any number of inputs.
        """
        return None

    def output_bound(self, bound: int | None) -> int | None:
        """Ready bound for the next stage after :meth:`update` (``bound``, unless rows wait).

        An operator that holds results back (a join with state on disk) returns a lower bound:
        every output with ``ts <`` the returned bound has been returned.
        """
        return bound

    def finish(self) -> pa.Table:
        """End of input: return what is still open (row operators: nothing)."""
        return self.output_schema.empty_table()

    @abstractmethod
    def snapshot(self) -> bytes:
        """The operator's whole state as snapshot bytes (see the module docstring)."""

    @classmethod
    @abstractmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        """Rebuild an operator from :meth:`snapshot` bytes (StateError if corrupt)."""

    @classmethod
    def restore_stage(cls, data: bytes, stage: StageSpec) -> KeyedOperator:
        """Restore the operator of the query's ``stage`` (StateError if the snapshot is another's).

        Operators whose restore could run code the snapshot names (``udf``) compare the stage
        before restoring; the others restore, then compare.
        """
        op = cls.restore(data)
        check_stage(op.stage, stage)
        return op

    @property
    def state_bytes(self) -> int:
        """Bytes of state held (for metrics and memory budgets)."""
        return 0


def check_stage(held: StageSpec, wanted: StageSpec) -> None:
    """StateError naming both if a snapshot's stage ``held`` is not the query's ``wanted``."""
    if held.text() != wanted.text():
        raise StateError(f"the state holds operator {held.text()!r} but the query defines "
                         f"{wanted.text()!r}; the state was written by another query: start it "
                         f"with a new checkpoint location")


Op = TypeVar("Op", bound=type[KeyedOperator])


def register(cls: Op) -> Op:
    """Class decorator: make ``cls`` buildable by its stage :attr:`~KeyedOperator.name`."""
    REGISTRY[cls.name] = cls
    return cls


def operator_class(name: str) -> type[KeyedOperator]:
    """The class registered under ``name``."""
    operator_names()  # the built-ins register on first use
    try:
        found: type[KeyedOperator] = REGISTRY[name]
    except KeyError:
        raise ConfigError(f"{name!r} is not an operator; operators: "
                          f"{', '.join(sorted(REGISTRY))}") from None
    return found


def build_operator(stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                   ts_column: str, aggregates: tuple[str, ...] = ()) -> KeyedOperator:
    """Build the operator a stage names for ``input_schema`` (ConfigError naming the stage)."""
    return operator_class(stage.name)(stage, input_schema, key_columns, ts_column, aggregates)
