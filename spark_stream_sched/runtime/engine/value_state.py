"""The ``ordered()`` processor's state: one value per partition group in Spark's state store.

:class:`ValueStateStore` is the :class:`~spark_stream_sched.runtime.state.store.GroupStore` of
``ordered()`` over one value slot with the methods of pyspark's ``ValueState`` (``exists``,
``get``, ``update``, ``clear``); the adapter hands it Spark's slot, whose schema
(``STATE_SCHEMA`` in :mod:`spark_stream_sched.spark.transform_processor`) is the tuple it
stores: pending rows (Arrow IPC), operator snapshot, last ready bound, the writing query's
fingerprint, each input's largest event time so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.engine.packing import pending_from_ipc, pending_to_ipc
from spark_stream_sched.runtime.engine.sequence_order import NOTHING_SEEN
from spark_stream_sched.runtime.query.spec import QuerySpec
from spark_stream_sched.runtime.state.store import GroupState

__all__ = ["OUT_OF_ORDER", "PENDING_COMPRESSION", "ValueStateStore"]

#: Compression of the pending rows in the state value. pyspark 4.3's state client moves a
#: value between the JVM and Python as a pickle, and the JVM pickles ``binary`` byte by byte:
#: measured on the 2 M-row benchmark, 43 MB of pending rows per micro-batch made that one of
#: the largest JVM costs. LZ4 cut them about 3x for ~10 ms of CPU per group and batch (zstd:
#: 5.6x but 30 ms).
PENDING_COMPRESSION = "lz4"
#: The error for a row below the bound a group already released (fields: GroupedBatch.late).
OUT_OF_ORDER = ("input {input} is out of order at {column}={position!r}: ts {ts} is below the "
                "ready bound {bound} already released, so an earlier row of that input had a "
                "higher ts; sort the input by event time or use out_of_order='drop'")


class ValueStateStore:
    """The :class:`~spark_stream_sched.runtime.state.store.GroupStore` over Spark's state store.

    One value per partition group (the processor's grouping key, so ``group`` is implicit):
    ``load`` reads it (None: a fresh group) and checks that this query wrote it; ``save`` writes
    the group's new state with ``bound`` (the ready bound the batch used), or clears the value
    when the group holds nothing. Spark commits, versions and prunes it with the checkpoint.

    ``rows_schema``: the pending rows in memory (payload, ``__input``, ``__seq``); they are
    stored without ``__seq`` and get it back from ``sequence_column`` on load
    (:func:`~spark_stream_sched.runtime.engine.packing.pending_to_ipc`). :attr:`seen` is each
    input's largest event time so far (``NOTHING_SEEN``: none), stored as int64 little-endian
    bytes and kept even when the group holds no rows.
    """

    def __init__(self, state: Any, spec: QuerySpec, rows_schema: pa.Schema,
                 sequence_column: str) -> None:
        self._state, self._spec, self._rows_schema = state, spec, rows_schema
        self._sequence_column = sequence_column
        self._loaded: GroupState | None = None
        self.bound: int | None = None
        self.seen = np.full(spec.n_inputs, NOTHING_SEEN, np.int64)

    def load(self, group: int) -> GroupState:
        """The group's state (read once); also sets :attr:`bound` to the bound it last used."""
        if self._loaded is None:
            self._loaded = self._read()
        return self._loaded

    def _read(self) -> GroupState:
        if not self._state.exists():
            return GroupState()
        value = self._state.get()
        assert value is not None
        pending, snapshot, bound, written_by, seen = value
        if written_by != self._spec.fingerprint():
            raise StateError(
                f"ordered(): the state in this query's checkpoint was written by another query "
                f"definition (fingerprint {written_by}, this query {self._spec.fingerprint()}): "
                f"the window, keys, aggregates, operators, inputs or timestamp changed. Keeping "
                f"the state would mix two queries; restart with a new checkpointLocation")
        rows = pending_from_ipc(bytes(pending), self._sequence_column)
        if _columns(rows.schema) != _columns(self._rows_schema):
            raise StateError(
                f"ordered(): the pending rows in this query's checkpoint have the columns "
                f"{rows.schema.names}, this query keeps {self._rows_schema.names}: the state "
                f"was written by another definition or release; restart with a new "
                f"checkpointLocation")
        self.bound = None if bound is None else int(bound)
        if seen is not None:
            self.seen = _seen_from_bytes(bytes(seen), self._spec.n_inputs)
        return GroupState(rows, bytes(snapshot))

    def save(self, states: Mapping[int, GroupState]) -> None:
        """Write the group's state (clear the value when it is empty)."""
        (state,) = states.values()
        nothing_seen = bool((self.seen == NOTHING_SEEN).all())
        if state.is_empty and nothing_seen:
            self._state.clear()
            return
        pending = state.pending if state.pending is not None else self._rows_schema.empty_table()
        seen = None if nothing_seen else self.seen.astype("<i8").tobytes()
        self._state.update((pending_to_ipc(pending, PENDING_COMPRESSION), state.window,
                            self.bound, self._spec.fingerprint(), seen))


def _seen_from_bytes(raw: bytes, n_inputs: int) -> np.ndarray:
    """Each input's largest event time from its stored int64 little-endian bytes (StateError)."""
    if len(raw) != 8 * n_inputs:
        raise StateError(
            f"ordered(): the state in this query's checkpoint holds {len(raw)} bytes of the "
            f"inputs' largest event times, {8 * n_inputs} expected for {n_inputs} inputs: it is "
            f"damaged or from another release; restart with a new checkpointLocation")
    return np.frombuffer(raw, "<i8").astype(np.int64)


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """Names and types (nullability differs between Spark's schema and Arrow IPC's)."""
    return [(f.name, f.type) for f in schema]
