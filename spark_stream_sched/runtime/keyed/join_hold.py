"""Join results held back until no missing result can precede them: the join's reorder buffer.

Liu & Rundensteiner's (2005) clean-up stage (§4.2, Eq. 1) produces the results that pushed state
missed only when the group's window closes, after later results left. To keep the join's output in
the total order -- by the completing tuple's position ``(ts, input, seq)``, then the partners'
positions
-- so that a window or a keyed operator can follow it, the join holds back every result that a
missing result could still precede, and releases it merged with the clean-up results.

**Why the release is exact.** A result is *missing* when a tuple of it was pushed before its
completing tuple ``c`` arrived; ``c`` arrived after that push, so ``ts_c`` is at least the
push's floor (:attr:`~.join_state.Generation.floor`: the larger of the generation's largest ts
and the ready bound then; rows come in the total order). With ``H`` the least floor of the first
generations of the groups still holding generations (``+inf`` if none), every result with
``ts_c < H`` is final: no missing result can precede it (``ts_c >= H``), and every later normal
result is completed by a later tuple, later in the total order. :meth:`HeldResults.release`
returns exactly the held results with ``ts_c < H`` in order, and a following operator gets the
ready bound ``min(R, H)`` (:meth:`~.join.Join.output_bound`): every result with ``ts < min(R, H)``
has left. ``H`` never drops below a bound already given downstream: a later push's floor is at
least the ready bound of that time.

**Memory.** Held results count toward the join's memory budget and are pushed to disk first
(they are only read again at release, never probed): each push sorts the buffer and writes it
as checksummed Arrow IPC *runs* of at most ``piece_rows`` rows. A release reads back only the
runs holding a result below ``H``; the release at the end of input (:meth:`HeldResults.drain`)
merges the runs in parts (:mod:`~spark_stream_sched.runtime.keyed.join_merge`), so it never
reads all of them at once. Order keys travel as hidden columns (:data:`.join_merge.ORDER_MS`
and one ``__order_seq_<j>`` per input).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.join_merge import (
    ORDER_MS,
    Part,
    merge,
    order_of,
    overlap,
    partner_seq,
)
from spark_stream_sched.runtime.keyed.join_state import SizedTable, SpillStore, arrow_bytes, fresh

#: Snapshot kind of a spilled run of held results.
HELD_KIND = "keyed.join.held"
#: Rows per run written by :meth:`HeldResults.push` unless the join says otherwise.
PIECE_ROWS = 16_384
#: Fewest rows per run, whatever the budget (:func:`piece_rows`).
MIN_PIECE_ROWS = 64
#: Most batches of runs the final merge reads from at once (:meth:`HeldResults.drain`).
FAN_IN = 16


@dataclass
class HeldRun:
    """Held results pushed to disk, sorted: the file, its rows, least and largest completing ts."""

    path: str
    rows: int
    min_ms: int
    max_ms: int
    size: int
    #: Push (or merge) that wrote it: a batch's runs are consecutive in the output order.
    batch: int = 0


class HeldResults(SizedTable):
    """Reorder buffer of one join operator (see the module docstring).

    :attr:`memory` holds the held results in memory, :attr:`size` their bytes.

    Parameters
    ----------
    output
        The join's output schema (``ts``, ``__input``, ``__seq``, keys, payloads).
    n_inputs
        N: one hidden partner-seq column per input.
    spill
        The operator's spill store (runs go next to its generations).
    piece_rows
        Most rows per run on disk (a push writes several; :mod:`.join_merge` reads one at a
        time).
    note
        Gets the bytes in memory at each step of the final merge (the join's accounting).
    """

    def __init__(self, output: pa.Schema, n_inputs: int, spill: SpillStore,
                 piece_rows: int = PIECE_ROWS, note: Callable[[int], None] = lambda _: None
                 ) -> None:
        self.output = output
        self.piece_rows = max(1, piece_rows)
        self.note = note
        self.n_inputs = n_inputs
        self.schema = pa.schema([*output, pa.field(ORDER_MS, pa.int64()),
                                 *(pa.field(partner_seq(j), pa.int64()) for j in range(n_inputs))])
        self._spill = spill
        self.runs: list[HeldRun] = []
        self._batch = 0
        #: shared empty tables (immutable; building one costs about 0.2 ms)
        self._empty, self._no_output = self.schema.empty_table(), self.output.empty_table()
        self.memory = self._empty

    @property
    def spilled_bytes(self) -> int:
        """Bytes the held results on disk took in memory."""
        return sum(r.size for r in self.runs)

    @property
    def rows(self) -> int:
        """Held results in memory and on disk."""
        return int(self.memory.num_rows) + sum(r.rows for r in self.runs)

    def with_keys(self, table: pa.Table, keys: np.ndarray) -> pa.Table:
        """``table`` (output rows) with its order keys ``(ms, input, seq, seq_0..)`` attached."""
        ms, partners = keys[0], keys[3:]
        columns = [*table.columns, pa.array(ms, pa.int64()),
                   *(pa.array(p, pa.int64()) for p in partners)]
        return pa.Table.from_arrays(columns, schema=self.schema)

    def hold(self, new: list[tuple[pa.Table, np.ndarray]]) -> None:
        """Hold ``new`` results in memory (``(output rows, order keys)`` pairs), releasing none."""
        parts = [self.with_keys(t, k) for t, k in new if t.num_rows]
        if parts:
            self.memory = pa.concat_tables([self.memory, *parts]).combine_chunks()

    def release(self, new: list[tuple[pa.Table, np.ndarray]], below: int | None) -> pa.Table:
        """Hold ``new`` results; return every held result with ts < ``below``, in order.

        ``new`` holds ``(output rows, order keys)`` pairs (keys as :meth:`with_keys` takes
        them). ``below`` None releases everything (no missing result can precede any). The
        rows have the output schema; the rest stays held, in memory.
        """
        due = [r for r in self.runs if below is None or r.min_ms < below]
        parts = [self.memory, *(self.with_keys(t, k) for t, k in new if t.num_rows),
                 *(self._read(r) for r in due)]
        for run in due:
            self._spill.delete(run.path)
            self.runs.remove(run)
        table = pa.concat_tables(parts)  # chunks kept: the parts are not copied
        del parts
        if below is not None:  # only what leaves is sorted; the rest stays held, unsorted
            ms = np.asarray(table.column(ORDER_MS).to_numpy())
            leaving = ms < below
            self.memory = table.filter(pa.array(~leaving)).combine_chunks()
            table = table.filter(pa.array(leaving))
        else:
            self.memory = self._empty
        if not table.num_rows:
            return self._no_output
        order = order_of(table, self.n_inputs)  # one copy: the output columns, in order
        return table.select(self.output.names).take(order).combine_chunks()

    def push(self) -> int:
        """Write the held results in memory to disk, sorted, as one batch of runs; bytes."""
        size = self.size
        if self.memory.num_rows:
            self._write([self.memory.take(order_of(self.memory, self.n_inputs))])
            self.memory = self._empty
        return size

    def _write(self, tables: Iterable[pa.Table]) -> None:
        """Write consecutive sorted ``tables`` as one batch of runs of ``piece_rows`` rows."""
        self._batch += 1
        waiting: list[pa.Table] = []
        for table in chain(tables, [None]):
            if table is not None:
                waiting.append(table)
                if sum(t.num_rows for t in waiting) < self.piece_rows:
                    continue
            rows = pa.concat_tables(waiting) if waiting else self.schema.empty_table()
            end = rows.num_rows if table is None else rows.num_rows // self.piece_rows * (
                self.piece_rows)
            for lo in range(0, end, self.piece_rows):
                piece = rows.slice(lo, min(self.piece_rows, end - lo))
                ms = piece.column(ORDER_MS)
                path = self._spill.put("held", HELD_KIND, {"rows": piece.num_rows}, piece)
                self.runs.append(HeldRun(path, piece.num_rows, int(ms[0].as_py()),
                                         int(ms[-1].as_py()), arrow_bytes(piece), self._batch))
            waiting = [rows.slice(end)] if end < rows.num_rows else []

    def drain(self, new: list[tuple[pa.Table, np.ndarray]]) -> Iterator[pa.Table]:
        """Hold ``new``, then every held result in order, in parts (:func:`.join_merge.merge`).

        Batches of runs are first merged ``FAN_IN`` at a time into one (written back) while
        more than ``FAN_IN`` overlap in ts; then each run is read back (and its file deleted)
        only when no earlier result is left to return, so at most ``FAN_IN`` runs and the
        results in memory are held at once.
        """
        self.hold(new)
        self._compact()
        memory, self.memory = self.memory, self._empty
        parts = [Part(r.min_ms, partial(self._take, r)) for r in self.runs]
        self.runs = []
        if memory.num_rows:
            memory = memory.take(order_of(memory, self.n_inputs))
            first = int(memory.column(ORDER_MS)[0].as_py())
            parts.append(Part(first, memory.slice))  # slice(): the whole table
        del memory  # the merge drops its part once loaded
        yield from merge(parts, self.n_inputs, self.output.names, self.note)

    def _compact(self) -> None:
        """Merge the widest ``FAN_IN`` batches into one until at most ``FAN_IN`` overlap."""
        while True:
            batches: dict[int, list[HeldRun]] = {}
            for run in self.runs:
                batches.setdefault(run.batch, []).append(run)
            spans = {b: (rs[0].min_ms, rs[-1].max_ms) for b, rs in batches.items()}
            if overlap(list(spans.values())) <= FAN_IN:
                return
            chosen = sorted(spans, key=lambda b: (spans[b][0] - spans[b][1], b))[:FAN_IN]
            runs = [r for b in chosen for r in batches[b]]
            self.runs = [r for r in self.runs if r.batch not in chosen]
            self._write(merge([Part(r.min_ms, partial(self._take, r)) for r in runs],
                              self.n_inputs, self.schema.names, self.note))

    def _take(self, run: HeldRun) -> pa.Table:
        """Read ``run`` back and delete its file."""
        table = self._read(run)
        self._spill.delete(run.path)
        return table

    def _read(self, run: HeldRun) -> pa.Table:
        return self._spill.get(run.path, HELD_KIND, "held join results", self.schema, run.rows)

    # -- snapshots: runs folded in, written back on restore -----------------------------------

    def fold(self) -> tuple[list[Any], pa.Table]:
        """``[rows in memory, rows spilled]`` and every held result (memory first)."""
        spilled = [self._read(r) for r in self.runs]
        return ([self.memory.num_rows, sum(r.rows for r in self.runs)],
                pa.concat_tables([self.memory, *spilled]))

    def unfold(self, meta: list[Any], table: pa.Table) -> None:
        """Inverse of :meth:`fold`: the memory part back in memory, the spilled part as one run."""
        in_memory, spilled = int(meta[0]), int(meta[1])
        self.memory = fresh(table.slice(0, in_memory))
        if spilled:
            kept, self.memory = self.memory, fresh(table.slice(in_memory, spilled))
            self.push()
            self.memory = kept

    def drop(self) -> None:
        """Delete every run (the operator is closed)."""
        for run in self.runs:
            self._spill.delete(run.path)
        self.runs = []


def piece_rows(budget: int | None, output: pa.Schema, n_inputs: int) -> int:
    """Rows per run of held results: about ``budget / FAN_IN`` bytes (None: :data:`PIECE_ROWS`).

    A row's bytes are estimated from ``output``'s fixed widths (16 for other types) plus the
    order keys; never fewer than :data:`MIN_PIECE_ROWS` rows (a tiny budget would otherwise
    write a file per few rows and merge them for minutes: the runs a merge holds then exceed
    the budget by at most ``FAN_IN`` such runs).
    """
    if budget is None:
        return PIECE_ROWS
    width = sum(f.type.bit_width // 8 if pa.types.is_primitive(f.type) else 16 for f in output)
    row = width + 8 * (1 + n_inputs)
    return max(MIN_PIECE_ROWS, budget // FAN_IN // row)
