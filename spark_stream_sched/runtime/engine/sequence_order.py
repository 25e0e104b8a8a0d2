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

Under ``fail`` the error must not depend on which group's task fails first, so it names the
input's *first* out-of-order row along the sequence, found from the summaries alone: the rows
of a batch up to its first row below ``__before`` are sorted, so that first row is either the
batch's first row (when it lies below the earlier batches' largest event time) or the summary's
first row below its ``__before``. Every group raises the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.runtime.packets import EVENT_TIME_MAX, INPUT_COL, TS_MAX, event_times

__all__ = ["BEFORE_COL", "NOTHING_SEEN", "BatchOrder", "order_marks", "ready_bound_from_seen",
           "seen_after", "sequence_check"]

#: Column of each row's largest earlier event time in its micro-batch (``NOTHING_SEEN``: none).
BEFORE_COL = "__before"
NOTHING_SEEN = int(np.iinfo(np.int64).min)
#: Columns of the summaries' Arrow table.
SUMMARY_SCHEMA = pa.schema([
    ("input", pa.int32()), ("newest", pa.int64()), ("first_seq", pa.string()),
    ("first_ts", pa.int64()), ("bad_seq", pa.string()), ("bad_ts", pa.int64()),
    ("bad_before", pa.int64()), ("ended", pa.bool_())])


@dataclass(frozen=True)
class BatchOrder:
    """One input's rows of one micro-batch along the sequence.

    ``newest``: their largest event time (ms; ``NOTHING_SEEN`` when the batch held only the
    end-of-input marker); ``first_*``: the first row's sequence value (``repr``) and event time
    (``None`` without rows); ``bad_*``: the first row below the largest event time before it
    in the batch, with that time (``None`` when the batch's rows are sorted); ``ended``: the
    batch held the input's end-of-input marker.
    """

    input_id: int
    newest: int
    first_seq: str | None
    first_ts: int | None
    bad_seq: str | None = None
    bad_ts: int | None = None
    bad_before: int | None = None
    ended: bool = False


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
    sequence_values = rows.column(sequence)
    summaries = []
    for run in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1):
        if run.size:
            running = np.maximum.accumulate(ts[run])
            before[run[1:]] = running[:-1]
            first = int(run[0])
            summary = BatchOrder(int(ids[first]), int(running[-1]),
                                 repr(sequence_values[first].as_py()), int(ts[first]))
            bad = np.flatnonzero(ts[run[1:]] < running[:-1])
            if bad.size:
                k = int(run[1 + bad[0]])
                summary = replace(summary, bad_seq=repr(sequence_values[k].as_py()),
                                  bad_ts=int(ts[k]), bad_before=int(running[bad[0]]))
            summaries.append(summary)
    return rows.append_column(BEFORE_COL, pa.array(before, pa.int64())), summaries


def with_ends(summaries: Sequence[BatchOrder], ended: set[int]) -> list[BatchOrder]:
    """``summaries`` with the inputs in ``ended`` marked as ended, ordered by input.

    An input whose batch held only its end-of-input marker gets a summary of its own.
    """
    by_input = {s.input_id: s for s in summaries}
    for j in ended:
        by_input[j] = replace(by_input.get(j, BatchOrder(j, NOTHING_SEEN, None, None)),
                              ended=True)
    return [by_input[j] for j in sorted(by_input)]


def summaries_table(summaries: Sequence[BatchOrder]) -> pa.Table:
    """The summaries as an Arrow table (what :func:`~.packing.pack` sends to every group)."""
    rows = [{"input": s.input_id, **{k: v for k, v in vars(s).items() if k != "input_id"}}
            for s in summaries]
    return pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)


def seen_after(seen: np.ndarray, summaries: pa.Table) -> np.ndarray:
    """Each input's largest event time over earlier batches and this one's ``summaries``.

    An input whose end-of-input marker was seen gets :data:`~..packets.EVENT_TIME_MAX`: every
    later row of it is out of order.

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
    ended = inputs[summaries.column("ended").to_numpy(zero_copy_only=False)]
    out[ended] = EVENT_TIME_MAX
    return out


def ready_bound_from_seen(seen: np.ndarray) -> int | None:
    """The ready bound ``R`` of rows whose inputs' largest event times are ``seen``.

    ``R = min_j seen_j``: every later row of input ``j`` has ``ts >= seen_j`` (later rows below
    it are out of order), so no row below ``R`` can still arrive. None while some input has
    sent nothing; :data:`~..packets.TS_MAX` (everything ready) once every input has ended.
    """
    low = int(seen.min())
    if low == NOTHING_SEEN:
        return None
    return TS_MAX if low >= EVENT_TIME_MAX else low


def sequence_check(rows: pa.Table, seen: np.ndarray, summaries: pa.Table, timestamp: str,
                   sequence: str, policy: str) -> pa.Table:
    """``rows`` (with :data:`BEFORE_COL`) without their out-of-order rows, the column dropped.

    ``seen``: each input's largest event time over earlier micro-batches (``NOTHING_SEEN``);
    ``summaries``: this micro-batch's (:func:`summaries_table`). Under ``policy="fail"`` an
    out-of-order row of *any* group raises instead, every group the same message.

    Raises
    ------
    InputError
        Naming the input, its first out-of-order row's sequence value, its ts and the larger
        earlier one.
    """
    if policy == "fail":
        first_out_of_order(seen, summaries, sequence)
    if rows.num_rows == 0:
        return rows.drop_columns([BEFORE_COL])
    ts = event_times(rows, timestamp, "ordered() input")
    ids = rows.column(INPUT_COL).to_numpy()
    bad = ts < np.maximum(rows.column(BEFORE_COL).to_numpy(), seen[ids])
    kept = rows.filter(pa.array(~bad)) if bad.any() else rows
    return kept.drop_columns([BEFORE_COL])


def first_out_of_order(seen: np.ndarray, summaries: pa.Table, sequence: str) -> None:
    """Raise for the lowest input whose batch holds an out-of-order row, naming its first.

    Raises
    ------
    InputError
        See :func:`sequence_check`.
    """
    for s in sorted(summaries.to_pylist(), key=lambda s: int(s["input"])):
        earlier = int(seen[s["input"]])
        if s["first_ts"] is None:
            continue
        if s["first_ts"] < earlier:
            seq, ts = s["first_seq"], s["first_ts"]
        elif s["bad_seq"] is not None:
            seq, ts, earlier = s["bad_seq"], s["bad_ts"], s["bad_before"]
        else:
            continue
        if earlier >= EVENT_TIME_MAX:
            raise InputError(
                f"ordered(): input {s['input']} sent a row after its end-of-input marker "
                f"({sequence} {seq}, ts {ts}); an input's end_of_input row must be its last")
        raise InputError(
            f"ordered(): input {s['input']} is out of order along {sequence!r}: {sequence} "
            f"{seq} has ts {ts} after ts {earlier} earlier in the input; sort the input by "
            f"event time along its sequence, or use out_of_order='drop' to drop such rows")
