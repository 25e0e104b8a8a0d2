"""Each input's event times along its sequence, checked the same way in every batching.

An input must be sorted by event time along its sequence column (a Kafka offset, a file
position): a row whose ``ts`` is below that of an earlier row of its input is out of order, and
``outOfOrder`` decides (``fail`` names the input, the row's sequence value and both timestamps;
``drop`` drops the row). The verdict is a function of the data alone, never of the batching:
row ``r`` is out of order iff ``r.ts < max(ts of every row of its input before r along the
sequence)``, over this and all earlier micro-batches -- the rule the sink applies at its commit
(``sink_rows.sequence_drops``).

``ordered()`` has no driver step that sees all rows, and its partition groups each see only
their keys' rows. So the check is split where the data is:

* :func:`order_marks` runs where one input's rows of a micro-batch are together (``ordered()``
  coalesces each input to one Spark partition before :func:`~.packing.pack`): it sorts them
  along the sequence and gives each row the largest event time before it in the batch
  (``__before``), and the input a :class:`BatchOrder` summary (the batch's largest event time).
  Every partition group receives every summary.
* :func:`sequence_check` runs in each group: a row is out of order iff its ``ts`` is below its
  ``__before`` or below the largest event time of its input in *earlier* micro-batches, which
  each group keeps in its state (:func:`seen_after`). All groups see the same summaries, so
  they keep the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.packets import INPUT_COL, event_times

__all__ = ["BEFORE_COL", "NOTHING_SEEN", "BatchOrder", "order_marks", "seen_after",
           "sequence_check"]

#: Column of each row's largest earlier event time in its micro-batch (``NOTHING_SEEN``: none).
BEFORE_COL = "__before"
NOTHING_SEEN = int(np.iinfo(np.int64).min)
#: Columns of the summaries' Arrow table.
SUMMARY_SCHEMA = pa.schema([("input", pa.int32()), ("newest", pa.int64())])


@dataclass(frozen=True)
class BatchOrder:
    """One input's rows of one micro-batch: their largest event time (ms)."""

    input_id: int
    newest: int


def order_marks(rows: pa.Table, timestamp: str, sequence: str
                ) -> tuple[pa.Table, list[BatchOrder]]:
    """``rows`` (payload + ``__input``) with :data:`BEFORE_COL`, and each input's summary.

    ``rows`` must hold *all* of each of its inputs' rows of the micro-batch. Rows keep their
    order; ``__before`` is the largest event time among the rows of the same input that come
    before along ``sequence`` (ties along the sequence count as before).
    """
    ts = event_times(rows, timestamp, "ordered() input")
    ids = rows.column(INPUT_COL).to_numpy()
    order = pc.sort_indices(pa.table({"i": rows.column(INPUT_COL),
                                      "s": rows.column(sequence)}),
                            sort_keys=[("i", "ascending"), ("s", "ascending")]).to_numpy()
    before = np.full(rows.num_rows, NOTHING_SEEN, np.int64)
    summaries = []
    for run in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1):
        if run.size:
            running = np.maximum.accumulate(ts[run])
            before[run[1:]] = running[:-1]
            summaries.append(BatchOrder(int(ids[run[0]]), int(running[-1])))
    return rows.append_column(BEFORE_COL, pa.array(before, pa.int64())), summaries


def summaries_table(summaries: Sequence[BatchOrder]) -> pa.Table:
    """The summaries as an Arrow table (what :func:`~.packing.pack` sends to every group)."""
    return pa.table({"input": pa.array([s.input_id for s in summaries], pa.int32()),
                     "newest": pa.array([s.newest for s in summaries], pa.int64())},
                    schema=SUMMARY_SCHEMA)


def seen_after(seen: np.ndarray, summaries: pa.Table) -> np.ndarray:
    """Each input's largest event time over earlier batches and this one's ``summaries``.

    Raises
    ------
    StateError
        One input's rows of the batch were summarised twice: they were not in one partition,
        so their order within the batch could not be checked.
    """
    inputs = summaries.column("input").to_numpy()
    if len(np.unique(inputs)) != len(inputs):
        raise StateError("ordered(): an input's rows of one micro-batch reached the order check "
                         "in several Spark partitions; each input must be one partition there "
                         "(ordered() coalesces each input); report this as a bug")
    out: np.ndarray = seen.copy()
    np.maximum.at(out, inputs, summaries.column("newest").to_numpy())
    return out


def sequence_check(rows: pa.Table, seen: np.ndarray, timestamp: str, sequence: str,
                   policy: str) -> pa.Table:
    """``rows`` (with :data:`BEFORE_COL`) without their out-of-order rows, the column dropped.

    ``seen``: each input's largest event time over earlier micro-batches (``NOTHING_SEEN``).
    Under ``policy="fail"`` the first out-of-order row raises instead.

    Raises
    ------
    InputError
        Naming the input, the row's sequence value, its ts and the larger earlier one.
    """
    if rows.num_rows == 0:
        return rows.drop_columns([BEFORE_COL])
    ts = event_times(rows, timestamp, "ordered() input")
    ids = rows.column(INPUT_COL).to_numpy()
    earlier = np.maximum(rows.column(BEFORE_COL).to_numpy(), seen[ids])
    bad = ts < earlier
    if bad.any() and policy == "fail":
        k = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"ordered(): input {int(ids[k])} is out of order along {sequence!r}: {sequence} "
            f"{rows.column(sequence)[k].as_py()!r} has ts {int(ts[k])} after ts "
            f"{int(earlier[k])} earlier in the input; sort the input by event time along "
            f"its sequence, or use out_of_order='drop' to drop such rows")
    kept = rows.filter(pa.array(~bad)) if bad.any() else rows
    return kept.drop_columns([BEFORE_COL])
