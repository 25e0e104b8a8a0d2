"""The ``ordered()`` processor's state value: pending rows stored without ``__seq``.

The value goes through Spark's state store as a row of the processor's ``STATE_SCHEMA``; these
tests hold it in a one-slot stand-in with the ``ValueState`` methods the store calls
(``exists``, ``get``, ``update``, ``clear``), to look at the stored bytes. The round trip
through Spark's RocksDB state store itself is covered by tests/spark/test_transform.py
(restarts included).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.engine.packing import from_ipc, to_ipc, with_seq
from spark_stream_sched.runtime.engine.value_state import PENDING_COMPRESSION, ValueStateStore
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.runtime.query.spec import spec_from_options
from spark_stream_sched.runtime.state.store import GroupState

SPEC = spec_from_options({"aggregates": "count(*) as n", "keyColumns": "meter",
                          "window": "10 seconds"}, 2)


class OneValue:
    """A value slot with the methods of pyspark's ``ValueState`` that the store uses."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


@pytest.mark.parametrize("sequence", [
    pa.array(["part-00001.parquet#0000000000000000007", "part-00001.parquet#0000000000000000008"]),
    pa.array([7, 8], pa.int32()),
])
def test_pending_rows_are_stored_without_seq_and_load_with_it(sequence: pa.Array) -> None:
    payload = pa.table({"ts": pa.array([5, 6], pa.int64()), "meter": pa.array([1, 2], pa.int64()),
                        "pos": sequence})
    rows = with_seq(payload.append_column(INPUT_COL, pa.array([0, 1], pa.int32())), "pos")
    slot = OneValue()
    store = ValueStateStore(slot, SPEC, rows.schema, "pos")
    store.bound = 4
    store.save({0: GroupState(rows, b"snapshot")})
    stored = from_ipc(slot.value[0])
    assert stored.schema.names == ["ts", "meter", "pos", INPUT_COL]
    assert rows.column(SEQ_COL).type == (pa.string() if pa.types.is_string(sequence.type)
                                         else pa.int64())
    loaded = ValueStateStore(slot, SPEC, rows.schema, "pos").load(0)
    assert loaded.pending is not None
    assert loaded.pending.equals(rows)
    assert loaded.window == b"snapshot"


def test_a_value_stored_with_seq_still_loads() -> None:
    """The layout before 2026-11-26 kept ``__seq`` in the stored rows."""
    payload = pa.table({"ts": pa.array([5], pa.int64()), "meter": pa.array([1], pa.int64()),
                        "pos": pa.array([9], pa.int64())})
    rows = with_seq(payload.append_column(INPUT_COL, pa.array([0], pa.int32())), "pos")
    slot = OneValue((to_ipc(rows, PENDING_COMPRESSION), b"w", 4, SPEC.fingerprint(), None))
    store = ValueStateStore(slot, SPEC, rows.schema, "pos")
    loaded = store.load(0)
    assert loaded.pending is not None
    assert loaded.pending.equals(rows)
    assert store.bound == 4


def test_pending_rows_of_other_columns_are_refused() -> None:
    other = pa.table({"ts": pa.array([5], pa.int64()), "pos": pa.array([9], pa.int64()),
                      INPUT_COL: pa.array([0], pa.int32())})
    slot = OneValue((to_ipc(other, PENDING_COMPRESSION), b"w", 4, SPEC.fingerprint(), None))
    schema = with_seq(other.add_column(1, "meter", pa.array([1], pa.int64())), "pos").schema
    with pytest.raises(StateError, match=r"pending rows in this query's checkpoint have the "
                                         r"columns \['ts', 'pos', '__input', '__seq'\]"):
        ValueStateStore(slot, SPEC, schema, "pos").load(0)
