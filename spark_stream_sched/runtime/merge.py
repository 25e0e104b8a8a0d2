"""S-Merge: deterministic incremental k-way merge of timestamp-sorted inputs.

This is the Tuple-Gate (T-Gate) of Gulisano et al. (2016), §4, §5.5, Algorithm 4, in vectorised
form. Tuples of N inputs are released in the total order ``(ts, input, seq)`` exactly when they are
*ready* (Gulisano et al. 2016, Def. 1, with the deterministic tie rule of the README's "Semantics"):
with ``R = min_j latest_ts(j)`` over the unfinished inputs (a finished input counts as +infinity; an
input that has produced nothing blocks), a tuple is released once ``ts < R``, or once every input
has finished. The strict ``<`` matters: an input whose latest ``ts`` equals ``R`` may still send
more tuples with that ``ts``, and those must come before equal-``ts`` tuples of higher-numbered
inputs.

Out-of-order input (a ``ts`` lower than an earlier one of the same input) is handled by policy:
``fail`` raises :class:`~spark_stream_sched.errors.OutOfOrderError` naming input, position and
both timestamps; ``drop`` drops the tuple and counts it in :attr:`SMerge.dropped`.

Released rows carry :data:`~.packets.INPUT_COL` and :data:`~.packets.SEQ_COL`. The result
depends only on the tuples pushed, never on how they were split into pushes or pops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import (
    ConfigError,
    InputError,
    OutOfOrderError,
    one_line,
    schema_line,
)
from spark_stream_sched.runtime.packets import (
    INPUT_COL,
    SEQ_COL,
    TS_MAX,
    Data,
    as_table,
    event_times,
)
from spark_stream_sched.runtime.state import snapshot

OutOfOrderPolicy = Literal["fail", "drop"]
OUT_OF_ORDER_POLICIES = ("fail", "drop")


@dataclass
class _InputState:
    """Buffered, not yet released tuples of one input, with their event times."""

    chunks: list[pa.Table] = field(default_factory=list)
    ts_chunks: list[np.ndarray] = field(default_factory=list)
    latest_ts: int | None = None
    next_seq: int = 0
    finished: bool = False
    dropped: int = 0

    def buffered(self) -> int:
        return sum(len(ts) for ts in self.ts_chunks)


def check_policy(policy: str) -> OutOfOrderPolicy:
    """Validate an out-of-order policy name."""
    if policy not in OUT_OF_ORDER_POLICIES:
        raise ConfigError(f"out-of-order policy {policy!r} is unknown; use 'fail' or 'drop'")
    return policy  # type: ignore[return-value]


def in_order_mask(ts: np.ndarray, previous: int | None, policy: str, input_id: int,
                  seq0: int) -> np.ndarray | None:
    """Keep-mask for tuples whose ts is not below an earlier ts of the same input.

    ``previous`` is the input's latest ts before this packet (None: none yet), ``seq0`` the
    position of ``ts[0]`` in the input. Returns None when every tuple is in order.

    Raises
    ------
    OutOfOrderError
        Under policy ``fail``, naming input, position and both timestamps.
    """
    if len(ts) == 0:
        return None
    floor = np.int64(previous) if previous is not None else ts[0]
    if ts[0] >= floor and (len(ts) < 2 or bool(np.all(ts[1:] >= ts[:-1]))):
        return None
    prev_max = np.maximum.accumulate(np.concatenate(([floor], ts[:-1])))
    keep = ts >= prev_max
    if policy == "fail":
        j = int(np.flatnonzero(~keep)[0])
        raise OutOfOrderError(input_id, seq0 + j, int(ts[j]), int(prev_max[j]))
    return np.asarray(keep)


def ready_bound(latest_ts: Sequence[int | None], finished: Sequence[bool],
                idle: Sequence[bool] | None = None) -> int | None:
    """The ready bound ``R`` (Gulisano et al. 2016, Def. 1) with the tie rule; the one definition.

    ``R = min_j latest_ts(j)`` over the unfinished inputs; a finished input counts as
    +infinity, so with every input finished ``R`` is :data:`~.packets.TS_MAX`. An unfinished
    input that has sent nothing (``latest_ts`` None) blocks: ``R`` is None. Inputs marked
    ``idle`` (an idle timeout the user set has expired; recorded by the caller) neither hold
    ``R`` back nor block; when every unfinished input is idle, ``R`` is the largest of their
    latest event times (None if none sent anything).
    """
    idle = idle if idle is not None else [False] * len(latest_ts)
    live = [(ts, quiet) for ts, done, quiet in zip(latest_ts, finished, idle, strict=True)
            if not done]
    if not live:
        return TS_MAX
    active = [ts for ts, quiet in live if not quiet]
    if active:
        return None if None in active else min(ts for ts in active if ts is not None)
    seen = [ts for ts, _ in live if ts is not None]
    return max(seen) if seen else None


def total_order(ts: np.ndarray, inputs: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """Indices that sort rows by ``(ts, input, seq)`` (stable: full ties keep their order).

    Rows usually arrive grouped by input, each input's rows in sequence order (a micro-batch's
    rows, a group's rows of one batch); then a stable sort on ``ts`` alone gives the same order
    as the three-key ``lexsort``, about 3x faster on the k sorted runs of k inputs (timsort
    merges runs). A group's pending rows followed by a batch's new rows are two such runs: each
    input's rows are still in sequence order, so a stable sort on ``(ts, input)`` gives the
    order (about 2x faster than three keys). Checking either takes one pass; other orders use
    the three-key ``lexsort``.
    """
    if len(ts) < 2:
        return np.arange(len(ts))
    step_input, step_seq = np.diff(inputs), np.diff(seqs)
    back = step_seq < 0
    if not bool(np.any((step_input < 0) | ((step_input == 0) & back))):
        return np.argsort(ts, kind="stable")
    if _inputs_in_sequence(inputs, seqs, np.flatnonzero((step_input != 0) | back) + 1):
        return np.lexsort((inputs, ts))
    return np.lexsort((seqs, inputs, ts))


def _inputs_in_sequence(inputs: np.ndarray, seqs: np.ndarray, cuts: np.ndarray) -> bool:
    """Whether each input's rows are in sequence order, given where runs of one input start.

    ``cuts`` splits the rows into segments of one input whose sequence numbers do not fall;
    the rows are in order when, per input, each segment starts no lower than its last one
    ended. Many segments (rows in no particular order) answer False without looking.
    """
    if len(cuts) > len(inputs) // 16 + 64:
        return False
    starts = np.concatenate([[0], cuts])
    ends = np.append(cuts, len(inputs)) - 1
    by_input = np.argsort(inputs[starts], kind="stable")  # each input's segments in turn
    segment_input = inputs[starts][by_input]
    first, last = seqs[starts][by_input], seqs[ends][by_input]
    same = segment_input[1:] == segment_input[:-1]
    return bool(np.all(~same | (first[1:] >= last[:-1])))


def release_ready(rows: pa.Table, bound: int | None, ts_column: str,
                  ts: np.ndarray | None = None) -> tuple[pa.Table, pa.Table]:
    """S-Merge's release step on buffered rows: those with ``ts < bound`` and the rest.

    ``rows`` carry :data:`~.packets.INPUT_COL` and :data:`~.packets.SEQ_COL` (an integer, or any
    sortable position such as text); the released rows come out in the total order
    ``(ts, input, seq)``, the others in their given order. ``bound``
    None releases nothing; :data:`~.packets.TS_MAX` (every input finished) releases everything.
    Used where the bound is known from outside the rows, e.g. a partition of a micro-batch that
    sees only its own groups' rows but releases by the whole query's ``R``.
    """
    if bound is None or rows.num_rows == 0:
        return rows.slice(0, 0), rows
    if ts is None:
        ts = event_times(rows, ts_column, "buffered rows")
    ready = ts < bound if bound != TS_MAX else np.ones(len(ts), bool)
    seq = rows.column(SEQ_COL)
    if pa.types.is_integer(seq.type):
        order = total_order(ts, rows.column(INPUT_COL).to_numpy(), seq.to_numpy())
    else:  # a position of another sortable type (e.g. "file#row" text): Arrow sorts it
        keys = pa.table({"t": ts, "i": rows.column(INPUT_COL), "s": seq})
        order = pc.sort_indices(keys, [("t", "ascending"), ("i", "ascending"),
                                       ("s", "ascending")]).to_numpy()
    order = order[ready[order]]
    return rows.take(pa.array(order)), rows.filter(pa.array(~ready))


class SMerge:
    """Incremental k-way ordered merge with readiness (Gulisano et al. 2016, Def. 1, §5.5).

    Parameters
    ----------
    n_inputs:
        Number of input streams (ids ``0 .. n_inputs-1``).
    ts_column:
        Name of the event-time column (int64 ms or an Arrow timestamp).
    out_of_order:
        ``"fail"`` (default) or ``"drop"``.

    Notes
    -----
    All inputs must share one schema (the first pushed packet fixes it; later packets are cast
    to it or rejected with :class:`InputError`). Not thread-safe: one owner pushes and pops.
    """

    def __init__(self, n_inputs: int, ts_column: str = "ts",
                 out_of_order: str = "fail") -> None:
        if n_inputs < 1:
            raise ConfigError(f"S-Merge needs at least one input, got n_inputs={n_inputs}")
        self.n_inputs = n_inputs
        self.ts_column = ts_column
        self.policy = check_policy(out_of_order)
        self.schema: pa.Schema | None = None
        self._inputs = [_InputState() for _ in range(n_inputs)]
        self.released = 0

    # -- input side -------------------------------------------------------------------------

    def _check_input(self, input_id: int) -> _InputState:
        if not 0 <= input_id < self.n_inputs:
            raise InputError(f"input id {input_id} is out of range 0..{self.n_inputs - 1}")
        state = self._inputs[input_id]
        if state.finished:
            raise InputError(f"input {input_id} was already finished; it cannot send more rows")
        return state

    def _conform(self, table: pa.Table, input_id: int) -> pa.Table:
        if self.schema is None:
            self.schema = table.schema
            return table
        if table.schema.equals(self.schema):
            return table
        try:
            return table.select(self.schema.names).cast(self.schema)
        except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
            raise InputError(
                f"input {input_id} does not match the first input's schema: {one_line(exc)}; "
                f"give every input the same columns and types; input {input_id} has "
                f"{schema_line(table.schema)}, the first {schema_line(self.schema)}") from exc

    def push(self, input_id: int, data: Data) -> None:
        """Buffer the next tuples of input ``input_id`` (in that input's order).

        Raises
        ------
        OutOfOrderError
            Policy ``fail`` and a tuple's ts is lower than an earlier ts of the same input.
        InputError
            Unknown or finished input, bad timestamp column, an event time outside the
            supported range (always an error, whatever the out-of-order policy: a value in the
            wrong unit is a broken input, not a late tuple), schema mismatch.
        """
        state = self._check_input(input_id)
        table = as_table(data)
        if table.num_rows == 0:
            return
        ts = event_times(table, self.ts_column, f"input {input_id}", first_row=state.next_seq)
        table = self._conform(table, input_id)
        seq0 = state.next_seq
        seq = np.arange(seq0, seq0 + len(ts), dtype=np.int64)
        keep = in_order_mask(ts, state.latest_ts, self.policy, input_id, seq0)
        state.next_seq += len(ts)
        table = table.append_column(INPUT_COL, pa.array(np.full(len(ts), input_id, np.int32)))
        table = table.append_column(SEQ_COL, pa.array(seq))
        if keep is not None:
            state.dropped += int(len(keep) - np.count_nonzero(keep))
            table, ts = table.filter(pa.array(keep)), ts[keep]
            if len(ts) == 0:
                return
        state.chunks.append(table)
        state.ts_chunks.append(ts)
        state.latest_ts = int(ts[-1])

    def finish(self, input_id: int) -> None:
        """Declare that input ``input_id`` will send nothing more (it counts as +infinity)."""
        self._check_input(input_id).finished = True

    # -- readiness ---------------------------------------------------------------------------

    @property
    def ready_bound(self) -> int | None:
        """``R``: tuples with ``ts < R`` are ready; None while an unfinished input sent nothing."""
        return ready_bound([s.latest_ts for s in self._inputs], [s.finished for s in self._inputs])

    @property
    def all_finished(self) -> bool:
        """True once every input has been finished."""
        return all(state.finished for state in self._inputs)

    @property
    def dropped(self) -> list[int]:
        """Tuples dropped per input under the ``drop`` policy."""
        return [state.dropped for state in self._inputs]

    @property
    def buffered(self) -> int:
        """Tuples pushed but not yet released."""
        return sum(state.buffered() for state in self._inputs)

    # -- output side -------------------------------------------------------------------------

    def _take_ready(self, state: _InputState, bound: int,
                    everything: bool) -> list[tuple[pa.Table, np.ndarray]]:
        """Remove and return the input's buffered chunks (with event times) that are ready."""
        taken: list[tuple[pa.Table, np.ndarray]] = []
        while state.chunks:
            ts = state.ts_chunks[0]
            cut = len(ts) if everything else int(np.searchsorted(ts, bound, side="left"))
            if cut == 0:
                break
            if cut == len(ts):
                taken.append((state.chunks.pop(0), state.ts_chunks.pop(0)))
                continue
            taken.append((state.chunks[0].slice(0, cut), ts[:cut]))
            state.chunks[0] = state.chunks[0].slice(cut)
            state.ts_chunks[0] = ts[cut:]
            break
        return taken

    def pop_ready(self) -> pa.Table:
        """Release every buffered tuple that is ready, in the total order ``(ts, input, seq)``.

        Returns an empty table (possibly with no columns, before the first push) when nothing
        is ready.
        """
        bound = self.ready_bound
        empty = self.output_schema().empty_table() if self.schema is not None else pa.table({})
        if bound is None:
            return empty
        everything = self.all_finished
        per_input = [self._take_ready(state, bound, everything) for state in self._inputs]
        parts = [part for taken in per_input for part in taken]
        if not parts:
            return empty
        merged = pa.concat_tables([table for table, _ in parts])
        if sum(1 for taken in per_input if taken) > 1:
            # The concatenation is input-major and seq-ascending, so a stable sort on ts alone
            # yields (ts, input, seq); timsort merges the sorted runs in O(n log k).
            order = np.argsort(np.concatenate([ts for _, ts in parts]), kind="stable")
            merged = merged.take(pa.array(order))
        self.released += merged.num_rows
        return merged

    def output_schema(self) -> pa.Schema:
        """Schema of released rows: the inputs' schema plus the two reserved columns."""
        if self.schema is None:
            raise InputError("no rows have been pushed yet, so the schema is unknown")
        return self.schema.append(pa.field(INPUT_COL, pa.int32())).append(
            pa.field(SEQ_COL, pa.int64()))

    # -- state -------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Serialise the merge's state (buffered tuples and cursors) to bytes."""
        meta: dict[str, Any] = {
            "n_inputs": self.n_inputs, "ts_column": self.ts_column, "policy": self.policy,
            "released": self.released,
            "inputs": [
                {"latest_ts": s.latest_ts, "next_seq": s.next_seq, "finished": s.finished,
                 "dropped": s.dropped} for s in self._inputs
            ],
        }
        tables: dict[str, pa.Table] = {}
        if self.schema is not None:
            tables["schema"] = self.schema.empty_table()
            for i, state in enumerate(self._inputs):
                if state.chunks:
                    tables[f"input_{i}"] = pa.concat_tables(state.chunks)
        return snapshot.encode("smerge", meta, tables)

    @classmethod
    def restore(cls, data: bytes) -> SMerge:
        """Rebuild an :class:`SMerge` from :meth:`snapshot` bytes (StateError if corrupt)."""
        meta, tables = snapshot.decode(data, "smerge")
        merge = cls(meta["n_inputs"], meta["ts_column"], meta["policy"])
        merge.released = meta["released"]
        if "schema" in tables:
            merge.schema = tables["schema"].schema
        for i, info in enumerate(meta["inputs"]):
            state = merge._inputs[i]
            state.latest_ts, state.next_seq = info["latest_ts"], info["next_seq"]
            state.finished, state.dropped = info["finished"], info["dropped"]
            if f"input_{i}" in tables:
                table = tables[f"input_{i}"]
                state.chunks = [table]
                state.ts_chunks = [event_times(table, merge.ts_column, f"snapshot input {i}")]
        return merge
