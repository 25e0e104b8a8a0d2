"""Rows of an unordered micro-batch made runtime rows: the sink's input contract (no pyspark).

Spark keeps no order between the tasks of a micro-batch, nor inside one when a shuffle ran, so
the sink receives each input's rows of a batch as a set. :func:`prepare` makes them rows the
engine can merge: per input ordered by ``(ts, sequenceColumn)`` -- or, without a sequence
column, by ``ts`` then every sortable column (deterministic, not the arrival order) -- and
numbered into ``__seq`` (``batch id << 32`` + rank, so positions grow across batches);
end-of-input marker rows are taken out and reported. The checks of the contract:

* :func:`late_mask` -- a row whose ts is below what an earlier batch had of the same input;
* :func:`sequence_drops` -- a ts that decreases along ``sequenceColumn`` within an input, also
  across the batch's tasks (only the driver sees every task's rows).

Both are refused under ``outOfOrder=fail`` (naming input, sequence values and timestamps) or
dropped and counted under ``drop``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.engine.sink_config import SinkConfig
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL, event_times

#: Fix for out-of-order rows, appended to every such error.
POLICY_HINT = "(outOfOrder=fail; set outOfOrder=drop to drop such rows)"


@dataclass
class Prepared:
    """One table of staged rows made ready for the runtime.

    ``rows`` are the data rows (runtime columns + ``__input`` + ``__seq``), ``groups`` their
    partition groups, ``ids``/``ts`` their input ids and event times, ``ends`` the inputs an
    end-of-input row finished.
    """

    rows: pa.Table
    groups: np.ndarray
    ids: np.ndarray
    ts: np.ndarray
    ends: set[int]

    def input_max(self, n_inputs: int) -> list[int | None]:
        """Largest event time per input in these rows (None: no row)."""
        out: list[int | None] = [None] * n_inputs
        if len(self.ts):
            top = np.full(n_inputs, np.iinfo(np.int64).min, np.int64)
            np.maximum.at(top, self.ids, self.ts)
            present = np.bincount(self.ids, minlength=n_inputs) > 0
            out = [int(top[i]) if present[i] else None for i in range(n_inputs)]
        return out

    def counts(self, n_inputs: int) -> list[int]:
        """Rows per input."""
        return [int(c) for c in np.bincount(self.ids, minlength=n_inputs)]

    def select(self, mask: np.ndarray) -> Prepared:
        """The rows where ``mask`` holds."""
        return Prepared(self.rows.filter(pa.array(mask)), self.groups[mask], self.ids[mask],
                        self.ts[mask], self.ends)


def input_ids(table: pa.Table, config: SinkConfig, batch_id: int) -> np.ndarray:
    """The input id of every staged row; InputError naming the column for a null or bad id."""
    column = table.column(config.input_column)
    if column.null_count:
        raise InputError(f"ordered-agg sink: batch {batch_id}: column {config.input_column!r} "
                         f"(the input id) is null in {column.null_count} rows")
    ids = np.asarray(column.to_numpy(), dtype=np.int64)
    bad = (ids < 0) | (ids >= config.n_inputs)
    if bad.any():
        raise InputError(f"ordered-agg sink: batch {batch_id}: input id {int(ids[bad][0])} in "
                         f"column {config.input_column!r} is outside 0..{config.n_inputs - 1} "
                         f"(option inputs={config.n_inputs})")
    return ids


def end_rows(table: pa.Table, config: SinkConfig) -> np.ndarray:
    """Which staged rows are end-of-input markers (all False without ``endOfInputColumn``)."""
    if config.end_column is None:
        return np.zeros(table.num_rows, dtype=bool)
    return np.asarray(table.column(config.end_column).fill_null(False)
                      .to_numpy(zero_copy_only=False), dtype=bool)


def _sortable(kind: pa.DataType) -> bool:
    return not (pa.types.is_nested(kind) or pa.types.is_dictionary(kind))


def prepare(table: pa.Table, config: SinkConfig, batch_id: int) -> Prepared:
    """Data rows of ``table`` with ``__input``/``__seq`` and their groups (module doc).

    Raises
    ------
    InputError
        A null or out-of-range input id, or a null / out-of-range event time (named).
    """
    ids = input_ids(table, config, batch_id)
    ends_mask = end_rows(table, config)
    ends = {int(i) for i in np.unique(ids[ends_mask])}
    data = table.filter(pa.array(~ends_mask)) if ends_mask.any() else table
    ids = ids[~ends_mask]
    ts_name = config.spec.timestamp_column
    ts = event_times(data, ts_name, f"ordered-agg sink batch {batch_id}") if data.num_rows \
        else np.zeros(0, np.int64)
    runtime = config.runtime_schema(table.schema)
    ties = ([config.sequence_column] if config.sequence_column else
            [f.name for f in runtime if f.name != ts_name and _sortable(f.type)])
    keyed = data.select(ties).append_column("__id", pa.array(ids)).append_column(
        "__ts", pa.array(ts))
    order = pc.sort_indices(keyed, sort_keys=[("__id", "ascending"), ("__ts", "ascending")]
                            + [(c, "ascending", "at_start") for c in ties]).to_numpy()
    seq = np.empty(len(order), np.int64)
    seq[order] = (np.int64(batch_id) << np.int64(32)) + np.arange(len(order), dtype=np.int64)
    rows = data.select(runtime.names).append_column(INPUT_COL, pa.array(ids, pa.int32())) \
        .append_column(SEQ_COL, pa.array(seq, pa.int64()))
    groups = group_of_rows(rows, config.spec.key_columns, config.spec.partition_groups,
                           config.spec.group_function)
    return Prepared(rows, np.asarray(groups, np.int64), ids, ts, ends)


def combine_max(a: Sequence[int | None], b: Sequence[int | None]) -> list[int | None]:
    """Per-input maximum of two lists of largest event times (None: nothing seen)."""
    return [x if y is None else y if x is None else max(x, y) for x, y in zip(a, b, strict=True)]


def late_mask(prep: Prepared, seen: Sequence[int | None]) -> tuple[np.ndarray, str | None]:
    """Rows whose ts is below what earlier batches had of their input; and one described."""
    late = np.zeros(len(prep.ts), dtype=bool)
    for i, top in enumerate(seen):
        if top is not None:
            late |= (prep.ids == i) & (prep.ts < top)
    if not late.any():
        return late, None
    first = int(np.flatnonzero(late)[0])
    i = int(prep.ids[first])
    return late, (f"input {i} sent ts {int(prep.ts[first])} after ts {seen[i]} in an earlier "
                  f"batch; an input's event times must not decrease across micro-batches "
                  f"{POLICY_HINT}")


def refuse_finished(prep: Prepared, finished: set[int], batch_id: int) -> None:
    """InputError when ``prep`` holds rows of an input an end-of-input row finished."""
    for i in sorted(finished):
        if (prep.ids == i).any():
            raise InputError(f"ordered-agg sink: batch {batch_id} has rows for input {i}, "
                             f"which was declared finished by an end-of-input row")


def sequence_drops(tables: Sequence[pa.Table], config: SinkConfig, batch_id: int,
                   seen: Sequence[int | None]) -> list[np.ndarray]:
    """Per staged table, the rows whose ts decreases along ``sequenceColumn`` (module doc).

    ``tables`` hold at least the input-id, sequence, event-time (and end) columns of every task's
    staged rows. Under ``outOfOrder=fail`` the first such row raises an InputError naming the
    input, both sequence values and both timestamps.
    """
    name = config.sequence_column
    assert name is not None
    table = pa.concat_tables(tables)
    ids, data = input_ids(table, config, batch_id), ~end_rows(table, config)
    ts = np.full(table.num_rows, np.iinfo(np.int64).min, np.int64)
    if data.any():
        times = table.select([config.spec.timestamp_column])  # no other column is copied
        ts[data] = event_times(times if data.all() else times.filter(pa.array(data)),
                               config.spec.timestamp_column, f"ordered-agg sink batch {batch_id}")
    column = table.column(name)
    if column.null_count:
        raise InputError(f"ordered-agg sink: batch {batch_id}: sequenceColumn {name!r} is null "
                         f"in {column.null_count} rows")
    # One stable Arrow sort by (input, sequence) (strings sort natively; as NumPy objects they
    # sort in Python, ~2x slower; over one chunk rather than one per task, ~1.5x faster): each
    # input's data rows are then one run in sequence order.
    order = pc.sort_indices(pa.table({"i": pa.array(ids), "s": _one_chunk(column)}),
                            sort_keys=[("i", "ascending"), ("s", "ascending")]).to_numpy()
    order = order[data[order]]
    dropped = np.zeros(table.num_rows, dtype=bool)
    for where in np.split(order, np.flatnonzero(np.diff(ids[order])) + 1):
        if not len(where):
            continue
        i = int(ids[where[0]])
        start = seen[i] if seen[i] is not None else np.iinfo(np.int64).min
        before = np.maximum.accumulate(np.concatenate([[start], ts[where]]))[:-1]
        bad = ts[where] < before
        if bad.any() and config.spec.out_of_order == "fail":
            raise _sequence_error(config, batch_id, i, column, ts, where, before, bad)
        dropped[where[bad]] = True
    cuts = np.cumsum([t.num_rows for t in tables])[:-1]
    return np.split(dropped, cuts)


def _one_chunk(column: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``column`` as one array (kept chunked when one would overflow its 32-bit offsets)."""
    try:
        return column.combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return column


def _sequence_error(config: SinkConfig, batch_id: int, i: int, column: pa.ChunkedArray,
                    ts: np.ndarray, where: np.ndarray, before: np.ndarray,
                    bad: np.ndarray) -> InputError:
    name = config.sequence_column
    k = int(np.flatnonzero(bad)[0])
    top = int(np.flatnonzero(ts[where[:k]] == before[k])[-1]) if k else None
    earlier = ("an earlier batch" if top is None else
               f"{name} {column[int(where[top])].as_py()!r}")
    value = column[int(where[k])].as_py()
    return InputError(f"ordered-agg sink: batch {batch_id}: input {i} is out of order along "
                      f"{name!r}: {name} {value!r} has ts {int(ts[where[k]])} after ts "
                      f"{int(before[k])} at {earlier} {POLICY_HINT}")
