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
(they are only read again at release, never probed): each push writes the buffer as one
checksummed Arrow IPC *run*. A release reads back only the runs holding a result below ``H``.
Order keys travel as hidden columns (:data:`ORDER_MS` and one ``__order_seq_<j>`` per input:
partner ``j``'s seq, which orders input ``j``'s tuples as their positions do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.join_state import SizedTable, SpillStore, fresh
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

#: Hidden column: the completing tuple's event time in ms.
ORDER_MS = "__order_ms"
#: Snapshot kind of a spilled run of held results.
HELD_KIND = "keyed.join.held"


def partner_seq(j: int) -> str:
    """Hidden column holding the seq of a result's tuple of input ``j``."""
    return f"__order_seq_{j}"


@dataclass
class HeldRun:
    """Held results pushed to disk: the file, its row count and least completing ts."""

    path: str
    rows: int
    min_ms: int
    size: int


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
    """

    def __init__(self, output: pa.Schema, n_inputs: int, spill: SpillStore) -> None:
        self.output = output
        self.n_inputs = n_inputs
        self.schema = pa.schema([*output, pa.field(ORDER_MS, pa.int64()),
                                 *(pa.field(partner_seq(j), pa.int64()) for j in range(n_inputs))])
        self._spill = spill
        self.runs: list[HeldRun] = []
        self.memory = self.schema.empty_table()

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
        them). ``below`` None releases everything (end of input). The returned rows have the
        output schema; the rest stays held, in memory.
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
            self.memory = self.schema.empty_table()
        if not table.num_rows:
            return self.output.empty_table()
        order = order_of(table, self.n_inputs)  # one copy: the output columns, in order
        return table.select(self.output.names).take(order).combine_chunks()

    def push(self) -> int:
        """Write the held results in memory as one run on disk; bytes pushed."""
        size = self.size
        if self.memory.num_rows:
            ms = np.asarray(self.memory.column(ORDER_MS).to_numpy())
            path = self._spill.put("held", HELD_KIND, {"rows": self.memory.num_rows}, self.memory)
            self.runs.append(HeldRun(path, self.memory.num_rows, int(ms.min()), size))
            self.memory = self.schema.empty_table()
        return size

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


def order_of(table: pa.Table, n_inputs: int) -> np.ndarray:
    """Indices sorting held results in the join's output order (one ``lexsort``).

    By the completing tuple's ``(ts, input, seq)``, then the partners' seq, input 0 first.
    """
    names = [*(partner_seq(j) for j in reversed(range(n_inputs))), SEQ_COL, INPUT_COL, ORDER_MS]
    return np.lexsort([np.asarray(table.column(name).to_numpy()) for name in names])
