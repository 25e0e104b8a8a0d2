"""The join's clean-up stage: exactly the results that pushed state missed.

Liu & Rundensteiner, *Adapting State-Intensive Non-Blocking Queries over Distributed
Environments*, §4.2. A partition group's tuples arrive in the total order ``(ts, input, seq)``
and its pushes cut them into **epochs**: generations ``1 .. k`` on disk (the paper's partition
groups ``P_1 .. P_k``, each pushed once) and then the memory part. While the normal run goes
on, an arriving tuple probes only the memory part, so it produces only the results whose tuples
all lie in one epoch: ``V_t = A^t ⋈ B^t ⋈ C^t`` for every epoch ``t``. The results of the
union ``V' = (A^1 ∪ .. ∪ A^k ∪ A^m) ⋈ (B^1 ∪ ..) ⋈ ..`` that span two or more epochs are
*missing*; the clean-up produces exactly ``V' - V_1 - .. - V_k - V_m``.

**Eq. 1, iterated.** For two epochs, ``V' - V_1 = A^2⋈B^1⋈C^1 ∪ (A^1∪A^2)⋈B^2⋈C^1 ∪
(A^1∪A^2)⋈(B^1∪B^2)⋈C^2``: every result of the union with a tuple of epoch 2, each once
(attributed to the last input whose tuple is from epoch 2); removing ``V_2`` leaves those with
tuples of both epochs. Merging epoch after epoch into the union and taking each step's
difference gives, summed over the steps, every result whose tuples come from two or more
epochs, each once. :func:`missing_results` computes that sum in one pass over the merged epochs
(the *universe*): it enumerates every result of the union once, by its completing (last) tuple
(:meth:`~.join_match.JoinShape.probe`), knows the epoch of each of its tuples, and keeps the
results whose earliest epoch differs from the completing tuple's (epochs follow the total order,
so the completing tuple's epoch is the latest).

**Closing part of the generations** (windowed joins). When no later tuple can join the first
``closed`` generations (the ready bound passed their largest ts plus the window), only the
missing results whose *earliest* tuple lies in one of them are due; those generations are then
deleted, and the later epochs keep their own clean-up. Every missing result is therefore
produced exactly once: by the clean-up that closes the generation of its earliest tuple (or the
final one, which closes every generation). :func:`clean_up_group` does this for one
:class:`~.join_state.PartitionGroup`, reading its generations back one after another.

**Key slices.** A result joins tuples of one key, so the clean-up of a group is the union of
the clean-ups of its keys. :func:`clean_up_group` therefore reads the generations back once for
their key hashes, keeps only the hashes found in two epochs or more (no other key has a missing
result) and cuts them into slices whose tuples take at most the join's memory budget
(:func:`key_slices`); then, slice by slice, it reads the generations back again keeping only
that slice's tuples and hands the slice's results on before the next is read. A group's state
on disk is thus never in memory at once: at most one slice (the budget or, if more, a
sixteenth of the group's tuples that can have a missing result, or one key's tuples) and one
generation file, for one extra read of the group per slice (at most :data:`MAX_SLICES`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.groups import KEY
from spark_stream_sched.runtime.keyed.join_match import JoinShape, Matches, column, member
from spark_stream_sched.runtime.keyed.join_state import (
    JoinCounts,
    PartitionGroup,
    SpillStore,
    arrow_bytes,
    release_unused,
)

#: Most key slices per clean-up of a group (each reads the group's generations once more).
MAX_SLICES = 16


def missing_results(epochs: Sequence[pa.Table], closed: int, shape: JoinShape
                    ) -> tuple[pa.Table, Matches]:
    """The missing results whose earliest tuple lies in one of the first ``closed`` epochs.

    Parameters
    ----------
    epochs
        A partition group's stored tuples cut by its pushes: the generations in push order,
        then the memory part; each in the total order and together too. Columns: the key
        columns, ``__input``, the event time in ms (:data:`~.join_match.MS`) and optionally the
        key hash (:data:`~.groups.KEY`).
    closed
        How many leading epochs are closed (``len(epochs)``: all of them).
    shape
        The join's key columns, ``N`` and window.

    Returns
    -------
    tuple
        The universe (the epochs concatenated, chunks kept) and the results as positions in it,
        ordered by completing position, then partners (:func:`~.join_match.match`). No result
        lies within one epoch (the normal run produced those) and none has its earliest tuple
        in an epoch ``>= closed`` (a later clean-up produces those).
    """
    sizes = [e.num_rows for e in epochs]
    epoch = np.repeat(np.arange(len(epochs)), sizes)
    universe = pa.concat_tables(epochs) if epochs else pa.table({})
    if not universe.num_rows:
        return universe, Matches(np.empty(0, np.int64), [np.empty(0, np.int64)] * shape.n_inputs)
    found = shape.probe(universe, np.arange(universe.num_rows))
    earliest = np.minimum.reduce([epoch[p] for p in found.partners])
    return universe, found.where((earliest < closed) & (earliest != epoch[found.probe]))


def clean_up_group(group: PartitionGroup, spill: SpillStore, schema: pa.Schema, closed: int,
                   shape: JoinShape, counts: JoinCounts, slice_bytes: int | None,
                   emit: Callable[[pa.Table, Matches], None]) -> None:
    """Clean up ``group``'s first ``closed`` generations, slice by slice (module docstring).

    Reads the generations back (checksum-verified) one at a time: once for the key hashes
    (:func:`key_slices`), then once per slice, keeping only that slice's tuples. ``emit`` gets
    each slice's :func:`missing_results` (universe and results) before the next slice is read.
    Then counts the results in the group's ``P_o`` and in ``counts`` (with the time taken) and
    deletes the closed generations' files.
    """
    start = time.perf_counter()
    slices = key_slices(group, spill, schema, slice_bytes)
    for wanted in slices:
        epochs = [_only(spill.read(g, schema), wanted) for g in group.generations]
        epochs.append(_only(group.memory, wanted))
        universe, found = missing_results(epochs, closed, shape)
        del epochs
        counts.cleanup_universe_bytes = max(counts.cleanup_universe_bytes, arrow_bytes(universe))
        group.produced += len(found)
        counts.cleanup_results += len(found)
        emit(universe, found)
        del universe, found
        release_unused()
    for generation in group.generations[:closed]:
        spill.delete(generation)
    group.generations = group.generations[closed:]
    counts.cleanups += 1
    counts.cleanup_slices += len(slices)
    counts.cleanup_seconds += time.perf_counter() - start


def key_slices(group: PartitionGroup, spill: SpillStore, schema: pa.Schema,
               slice_bytes: int | None) -> list[np.ndarray]:
    """The key hashes a missing result of ``group`` can have, cut into slices (sorted arrays).

    A missing result has tuples of two epochs or more with one key, so only hashes found in
    two epochs or more are kept (equal hashes are a superset of equal keys: values decide in
    the match). They are cut, in hash order, into slices whose tuples take at most
    ``slice_bytes`` (estimated from the group's bytes per row; None: one slice), but into no
    more than :data:`MAX_SLICES` (each slice reads the generations again: a tiny budget must not
    read them once per key); the tuples of one hash are never cut.
    """
    uniques, rows = [], []
    for table in (*(spill.read(g, schema) for g in group.generations), group.memory):
        hashes, count = np.unique(column(table, KEY, np.uint64), return_counts=True)
        uniques.append(hashes)
        rows.append(count)
    bytes_ = sum(g.size for g in group.generations) + group.size
    total = sum(g.rows for g in group.generations) + group.memory.num_rows
    hashes, where = np.unique(np.concatenate(uniques), return_inverse=True)
    shared = np.bincount(where, minlength=len(hashes)) >= 2
    if not shared.any():
        return []
    weight = np.bincount(where, np.concatenate(rows), len(hashes))[shared] * (bytes_ / total)
    if slice_bytes is None:
        return [hashes[shared]]
    bound = max(slice_bytes, float(weight.sum()) / MAX_SLICES, 1.0)
    cut = np.floor((np.cumsum(weight) - weight) / bound).astype(np.int64)
    bounds = np.flatnonzero(np.diff(cut)) + 1
    return np.split(hashes[shared], bounds)


def _only(table: pa.Table, hashes: np.ndarray) -> pa.Table:
    """The tuples of ``table`` whose key hash is one of ``hashes`` (sorted), order kept."""
    return table.filter(pa.array(member(column(table, KEY, np.uint64), hashes)))
