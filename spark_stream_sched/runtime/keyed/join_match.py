"""Vectorised probing of an N-way symmetric hash equi-join (Liu & Rundensteiner 2005, §3, §3.4).

The join's tuples of one partition group are laid out as a *universe*: arrays in the total order
``(ts, input, seq)`` (position ``i`` of the universe is the ``i``-th tuple in that order). A *probe*
is a tuple of the universe that completes results: in a symmetric hash join (Liu & Rundensteiner
2005, §3, reference [28]) the arriving tuple is matched against the stored tuples of every other
input, so its partners are the tuples of the universe **before** it with the same key, one per other
input, whose ``ts`` lie within the window.

No Python loop runs per tuple or per key. The universe is sorted by ``(key, input, position)``
(one stable argsort), so the candidate partners of probe ``p`` from input ``j`` are one
contiguous run of that order: positions ``< p`` (the symmetric join's "stored before me") and
``ts > ts_p - within`` (ts is non-decreasing along the total order, so both limits are
``np.searchsorted`` in position space). The results of ``p`` are the cartesian product of its N
runs (its own input's run is ``p`` itself); they are enumerated with mixed-radix index
arithmetic, input 0 the most significant digit, so every probe's results come out ordered by
the partners' positions, input 0's partner first. Only the loop over the N ``<= 8`` inputs
remains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.groups import KEY
from spark_stream_sched.runtime.keys import key_ids
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

#: Stored event time in ms (so memory parts need no conversion when probed or purged).
MS = "__ms"


@dataclass(frozen=True)
class Matches:
    """Results of probing: one entry per result, as universe positions.

    Attributes
    ----------
    probe
        Universe position of each result's completing tuple (ascending).
    partners
        ``partners[j]`` is the universe position of each result's tuple of input ``j``
        (``partners[input[probe]] == probe``).
    """

    probe: np.ndarray
    partners: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.probe)

    def where(self, mask: np.ndarray) -> Matches:
        """The results where ``mask`` holds (order kept)."""
        return Matches(self.probe[mask], [p[mask] for p in self.partners])


def match(keys: np.ndarray, inputs: np.ndarray, ms: np.ndarray, probes: np.ndarray,
          n_inputs: int, within: int | None) -> Matches:
    """Every result completed by ``probes`` (see the module docstring).

    Parameters
    ----------
    keys
        Key id of every universe tuple: non-negative, below the universe's size, equal iff the
        key values are equal (:func:`~spark_stream_sched.runtime.keys.key_ids`; never a hash,
        which distinct keys may share); tuples with a null key are never in the universe.
    inputs
        Input number ``0 .. n_inputs-1`` of every universe tuple.
    ms
        Event time in ms of every universe tuple, non-decreasing (the total order).
    probes
        Ascending universe positions of the completing tuples.
    n_inputs
        N, the number of joined inputs.
    within
        Window in ms: partners need ``ts_p - ts < within``; None joins without a window.

    Returns
    -------
    Matches
        Ordered by the probe's position, then by the partners' positions, input 0 first.
    """
    size = len(keys)
    if size == 0 or len(probes) == 0:
        return Matches(np.empty(0, np.int64), [np.empty(0, np.int64)] * n_inputs)
    code = np.asarray(keys, np.int64) * n_inputs + inputs.astype(np.int64)
    order = np.argsort(code, kind="stable")
    span = size + 1
    composite = code[order] * span + order  # ascending: (key, input, position)
    first = (np.searchsorted(ms, ms[probes] - within, "right") if within is not None
             else np.zeros(len(probes), np.int64))
    own = inputs[probes]
    lows, counts = [], []
    for j in range(n_inputs):
        segment = (code[probes] - own + j) * span
        lo = np.searchsorted(composite, segment + first, "left")
        hi = np.searchsorted(composite, segment + probes, "left")
        lows.append(lo)
        counts.append(np.where(own == j, 1, np.maximum(hi - lo, 0)))
    total = np.prod(np.stack(counts), axis=0)
    return _enumerate(probes, own, order, lows, counts, total)


@dataclass(frozen=True)
class JoinShape:
    """What probing needs of the join: key columns, ``N`` and the window (ms or None)."""

    key_columns: list[str]
    n_inputs: int
    within: int | None

    def probe(self, universe: pa.Table, probes: np.ndarray) -> Matches:
        """Every result of ``universe`` completed by ``probes`` (:func:`probe_universe`)."""
        return probe_universe(universe, probes, self.key_columns, self.n_inputs, self.within)


def probe_universe(universe: pa.Table, probes: np.ndarray, key_columns: list[str],
                   n_inputs: int, within: int | None) -> Matches:
    """:func:`match` over a table of stored tuples (a partition group's universe).

    ``universe`` has the key columns, ``__input``, :data:`MS` and, if it was stored, the key
    hash :data:`~.groups.KEY` (computed otherwise); keys compare by value
    (:func:`~spark_stream_sched.runtime.keys.key_ids`).
    """
    hashes = column(universe, KEY, np.uint64) if KEY in universe.column_names else None
    ids = key_ids(universe, key_columns, hashes)
    return match(ids, column(universe, INPUT_COL, np.int64), column(universe, MS, np.int64),
                 probes, n_inputs, within)


def probe_group(memory: pa.Table, packet: pa.Table, shape: JoinShape
                ) -> tuple[pa.Table, Matches, int]:
    """The symmetric hash join's probe of one partition group by a packet of its tuples.

    Every result completed by a tuple of ``packet`` (stored tuples in the total order, after
    every tuple of ``memory``), with partners among the memory part and the packet's earlier
    tuples. Returns the universe (the memory tuples that can take part, then the packet), the
    results as positions in it, and where the packet starts in it.
    """
    if memory.num_rows:  # equal hashes: a superset of the equal keys (values decide in match)
        useful = member(column(memory, KEY, np.uint64), np.unique(column(packet, KEY, np.uint64)))
        if shape.within is not None:
            useful &= column(memory, MS, np.int64) > column(packet, MS, np.int64)[0] - shape.within
        memory = memory.filter(pa.array(useful))
    universe = pa.concat_tables([memory, packet]).combine_chunks()
    found = shape.probe(universe, np.arange(memory.num_rows, universe.num_rows))
    return universe, found, memory.num_rows


def _enumerate(probes: np.ndarray, own: np.ndarray, order: np.ndarray, lows: list[np.ndarray],
               counts: list[np.ndarray], total: np.ndarray) -> Matches:
    """Expand each probe's box of ``prod(counts)`` results by mixed-radix digits."""
    which = np.repeat(np.arange(len(probes)), total)
    local = np.arange(len(which)) - np.repeat(np.cumsum(total) - total, total)
    partners: list[np.ndarray] = [np.empty(0, np.int64)] * len(lows)
    for j in reversed(range(len(lows))):
        count = counts[j][which]
        digit = local % count
        local = local // count
        mine = own[which] == j
        partners[j] = np.where(mine, probes[which],
                               order[np.where(mine, 0, lows[j][which] + digit)])
    return Matches(probes[which], partners)


def order_keys(universe: pa.Table, found: Matches, ms: str) -> np.ndarray:
    """Full order keys of ``found`` (one row per key, major first).

    The completing tuple's ``(ms, input, seq)``, then each partner's seq, input 0 first;
    ``ms`` names the universe's event-time column.
    """
    seq = column(universe, SEQ_COL, np.int64)
    return np.stack([column(universe, ms, np.int64)[found.probe],
                     column(universe, INPUT_COL, np.int64)[found.probe], seq[found.probe],
                     *(seq[p] for p in found.partners)])


def result_rows(universe: pa.Table, found: Matches, output: pa.Schema,
                payload: list[str]) -> pa.Table:
    """The output rows of ``found`` (the join's output schema ``output``).

    The completing tuple's ts, ``__input``, ``__seq`` and key columns (the first fields of
    ``output``), then per input its ``payload`` columns and ts, in that input's partner.
    """
    n_head = len(output) - len(found.partners) * (len(payload) + 1)
    head = universe.select(output.names[:n_head])
    columns = list(head.take(found.probe).columns)
    ts_column = output.names[0]
    for partner in found.partners:
        columns += universe.select([*payload, ts_column]).take(partner).columns
    return pa.Table.from_arrays(columns, schema=output)


def column(table: pa.Table, name: str, dtype: type[np.generic]) -> np.ndarray:
    """One column of ``table`` as a NumPy array of ``dtype``."""
    return np.asarray(table.column(name).to_numpy(), dtype)


def member(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """Mask of ``values`` found in ``sorted_unique`` (one binary search each)."""
    if not len(sorted_unique):
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(sorted_unique, values), len(sorted_unique) - 1)
    return np.asarray(sorted_unique[pos] == values)


def ordered_results(parts: list[tuple[pa.Table, np.ndarray]], schema: pa.Schema) -> pa.Table:
    """Concatenate join results and sort them stably by their sort keys.

    Each part is ``(rows, keys)`` with one row of ``keys`` per sort key, major first
    (``Join._results``). Probe results are keyed by the completing row's index in the update
    (each group's part is already ordered by partners); clean-up results by completing
    position, then the partners' seq (one input's positions are ordered as its seq).
    """
    parts = [p for p in parts if p[0].num_rows]
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables([p[0] for p in parts])
    keys = np.concatenate([p[1] for p in parts], axis=1)
    return table.take(np.lexsort(keys[::-1])).combine_chunks()
