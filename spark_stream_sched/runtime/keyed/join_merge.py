"""Ordered merge of the join's held results: runs read back one event time at a time.

The reorder buffer (:mod:`~spark_stream_sched.runtime.keyed.join_hold`) writes its results to
disk sorted in the join's output order, in *runs* of a bounded number of rows, each knowing its
least completing ts. At the end of input every held result leaves, in order; :func:`merge`
returns them in parts without holding all of them: a run is read back only when the least ts
not yet returned reaches its least ts, and the rows below the least ts of every run still on
disk leave at once (none of those runs can hold an earlier row). The rows in memory are thus
the runs that overlap one event time (the rest of each, as a slice of it: runs are sorted, so
what leaves is a prefix and only it is copied); every run written by one push covers its own
stretch of ts, so at most about one run per push is in memory.

Order keys travel as hidden columns: :data:`ORDER_MS`, then one :func:`partner_seq` per input
(partner ``j``'s seq orders input ``j``'s tuples as their positions do).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.join_state import arrow_bytes, release_unused
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

#: Hidden column: the completing tuple's event time in ms.
ORDER_MS = "__order_ms"


def partner_seq(j: int) -> str:
    """Hidden column holding the seq of a result's tuple of input ``j``."""
    return f"__order_seq_{j}"


def order_of(table: pa.Table, n_inputs: int) -> np.ndarray:
    """Indices sorting held results in the join's output order (one ``lexsort``).

    By the completing tuple's ``(ts, input, seq)``, then the partners' seq, input 0 first.
    """
    names = [*(partner_seq(j) for j in reversed(range(n_inputs))), SEQ_COL, INPUT_COL, ORDER_MS]
    return np.lexsort([np.asarray(table.column(name).to_numpy()) for name in names])


@dataclass(frozen=True)
class Part:
    """A run of held results not yet read: its least completing ts and how to read it."""

    min_ms: int
    load: Callable[[], pa.Table]


def merge(parts: list[Part], n_inputs: int, output: list[str],
          note: Callable[[int], None]) -> Iterator[pa.Table]:
    """Every row of ``parts`` in the join's output order, as consecutive sorted tables.

    Each part must be sorted in that order (:func:`order_of`); parts may overlap in ts. Each is
    loaded once, in the order of its least ts (ties: list order); the rows that leave at a step
    are a prefix of every loaded part, so only they are copied (sorted, ``output`` columns).
    ``note`` gets the bytes held in memory (:func:`~.join_state.arrow_bytes`) after each load.
    """
    pending = deque(sorted(parts, key=lambda p: p.min_ms))  # stable; loaded parts leave it
    loaded: list[pa.Table] = []
    while pending:
        below = pending[0].min_ms
        due, loaded = _split(loaded, below)
        if due.num_rows:
            yield due.select(output).take(order_of(due, n_inputs))
        del due
        release_unused()
        while pending and pending[0].min_ms == below:
            loaded.append(pending.popleft().load())
        note(sum(arrow_bytes(t) for t in loaded))
    if loaded:
        rest = pa.concat_tables(loaded)
        yield rest.select(output).take(order_of(rest, n_inputs))


def _split(loaded: list[pa.Table], below: int) -> tuple[pa.Table, list[pa.Table]]:
    """The rows with completing ts ``< below`` (prefixes of the sorted ``loaded``), the rest."""
    heads, rest = [], []
    for table in loaded:
        cut = int(np.searchsorted(np.asarray(table.column(ORDER_MS).to_numpy()), below))
        heads.append(table.slice(0, cut))
        if cut < table.num_rows:
            rest.append(table.slice(cut))
    due = pa.concat_tables(heads) if heads else pa.table({ORDER_MS: pa.array([], pa.int64())})
    return due, rest


def overlap(spans: list[tuple[int, int]]) -> int:
    """Most of the closed ts ranges ``spans`` that share one event time (0 if none)."""
    events = sorted([(lo, 0) for lo, _ in spans] + [(hi, 1) for _, hi in spans])
    most = now = 0
    for _, end in events:  # one per range end: a few hundred at most, at the end of input
        now += -1 if end else 1
        most = max(most, now)
    return most
