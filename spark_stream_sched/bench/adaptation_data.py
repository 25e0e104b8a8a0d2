"""Workloads of ``bench adaptation``: synthetic 3-way join inputs, and the oracle.

The inputs are those of Liu & Rundensteiner (2005), §3.4.


Liu & Rundensteiner (2005), §3.4 controls its streams with two factors: the *tuple range* ``R`` and
the *range join ratio* ``r``: within the first ``R`` tuples of an input a key occurs about ``r``
times, so an arriving tuple of a 3-way join meets about ``r * r`` results, ``(2r)^2`` in the next
range, and so on (the state, and the output per tuple, grow with time). Here a partition group ``g``
has its own ratio ``r_g`` and weight ``w_g`` (share of the tuples, possibly changing every *phase*
of ``phase_rows`` tuples: fig. 14-16's alternating load), and a pool of ``R * w_g / r_g`` keys that
all fall into group ``g`` under the join's own router (:meth:`~..runtime.keyed.join.Join.group_of`),
so a group's ratio and memory are what the experiment sets.

Expected results of group ``g`` over ``n`` tuples per input: about ``n^3 w_g r_g^2 / R^2``.

Every tuple carries ``row`` (its position in its input), so a result is identified by
``(row_0, row_1, row_2)``; :func:`result_ids` and :func:`oracle_ids` turn outputs and the batch
oracle (:func:`~spark_stream_sched.testing.join_reference.reference_join`, run one partition group
at a time -- an equi-join decomposes by key -- to bound its memory) into sorted id arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.join_reference import reference_join

SCHEMA = pa.schema([("ts", pa.int64()), (INPUT_COL, pa.int32()), (SEQ_COL, pa.int64()),
                    ("k", pa.int64()), ("row", pa.int64())])
KEYS = ["k"]


#: What ``bench adaptation`` returns: one dict per measured point.
Results = list[dict[str, Any]]

#: Liu & Rundensteiner's fig. 11 (tuples and ms of the low- and high-rate pushes).
PAPER_FIG11 = {"low_tuples": 194_308, "low_ms": 26_879, "high_tuples": 992_893,
               "high_ms": 359_396}

#: The figure each case reproduces.
TITLES = {
    "fig9": "fig 9: push 10-90% of memory (random groups) when over budget vs no push",
    "fig11": "fig 11: push 30% least (Low-OutputRate) vs most (High-OutputRate) productive",
    "fig16": "fig 16: two tasks, alternating 10x load, without / with distributed adaptation",
    "fig21": "fig 21: three tasks, task 0 join ratio 4: lazy-disk vs active-disk"}


@dataclass(frozen=True)
class Workload:
    """A generated join input (see the module docstring).

    Attributes
    ----------
    rows
        Tuples per input (one per ms of event time).
    n_groups
        Partition groups of the join.
    ratio
        Range join ratio ``r_g`` of every group.
    weights
        Per phase, every group's share of the tuples (phases cycle).
    tuple_range
        ``R``, tuples per input in one range.
    phase_rows
        Tuples per input in one phase.
    n_inputs
        Joined inputs.
    seed
        Generator seed.
    """

    rows: int
    n_groups: int
    ratio: tuple[float, ...]
    weights: tuple[tuple[float, ...], ...]
    tuple_range: int
    phase_rows: int = 1 << 62
    n_inputs: int = 3
    seed: int = 0


def uniform(n: int, value: float = 1.0) -> tuple[float, ...]:
    """``n`` equal values (weights or ratios)."""
    return (value,) * n


def make_join(n_groups: int, n_inputs: int = 3, spill_dir: str | None = None,
              memory_budget: int | None = None) -> Join:
    """The runtime's ``join(n_inputs)`` on ``k``, unwindowed, over :data:`SCHEMA`.

    Unordered (``ordered=False``): clean-up results leave at the clean-up, as in Liu & Rundensteiner
    (2005), so the bench counts normal-run and clean-up results as the paper does and may move any
    group.
    """
    return Join(StageSpec("join", (str(n_inputs),), ()), SCHEMA, KEYS, "ts",
                n_groups=n_groups, spill_dir=spill_dir, memory_budget=memory_budget,
                ordered=False)


def key_pools(n_groups: int, sizes: Sequence[int], seed: int) -> list[np.ndarray]:
    """``sizes[g]`` distinct int64 keys routed to group ``g`` by the join's own router."""
    router, rng = make_join(n_groups), np.random.default_rng(seed)
    pools: list[list[np.ndarray]] = [[] for _ in range(n_groups)]
    have, need = np.zeros(n_groups, np.int64), np.asarray(sizes, np.int64)
    start = 0
    while (have < need).any():
        batch = int(max(1024, 2 * n_groups * need.max()))
        keys = start + rng.permutation(batch).astype(np.int64)
        start += batch
        groups = router.group_of(pa.table({"k": keys}))
        for g in np.flatnonzero(have < need):
            found = keys[groups == g][: need[g] - have[g]]
            pools[g].append(found)
            have[g] += len(found)
    return [np.concatenate(p) if p else np.empty(0, np.int64) for p in pools]


def generate(w: Workload) -> pa.Table:
    """The inputs merged in the total order ``(ts, input, seq)``: columns of :data:`SCHEMA`."""
    rng = np.random.default_rng(w.seed)
    weights = np.asarray(w.weights, float)
    weights /= weights.sum(axis=1, keepdims=True)
    mean = weights.mean(axis=0)
    sizes = np.maximum(1, np.round(w.tuple_range * mean / np.asarray(w.ratio))).astype(int)
    pools = key_pools(w.n_groups, list(sizes), w.seed + 1)
    flat, offsets = np.concatenate(pools), np.cumsum(sizes) - sizes
    phase = (np.arange(w.rows) // w.phase_rows) % len(weights)
    keys = np.empty((w.rows, w.n_inputs), np.int64)
    for p in range(len(weights)):
        at = np.flatnonzero(phase == p)
        for i in range(w.n_inputs):
            group = rng.choice(w.n_groups, size=len(at), p=weights[p])
            pick = (rng.random(len(at)) * sizes[group]).astype(np.int64)
            keys[at, i] = flat[offsets[group] + pick]
    return merged(keys)


def merged(keys: np.ndarray) -> pa.Table:
    """Inputs with ``keys[t, i]`` at event time ``t`` ms in input ``i``, in the total order."""
    rows, n_inputs = keys.shape
    ts = np.repeat(np.arange(rows, dtype=np.int64), n_inputs)
    inputs = np.tile(np.arange(n_inputs, dtype=np.int32), rows)
    return pa.Table.from_arrays([pa.array(ts), pa.array(inputs), pa.array(ts), pa.array(
        keys.reshape(-1)), pa.array(ts)], schema=SCHEMA)


def expected_results(w: Workload) -> float:
    """About how many results :func:`generate` gives (the module docstring's formula)."""
    weights = np.asarray(w.weights, float)
    mean = (weights / weights.sum(axis=1, keepdims=True)).mean(axis=0)
    ratio = np.asarray(w.ratio)
    return float(w.rows ** 3 * (mean * ratio ** 2).sum() / w.tuple_range ** 2)


def result_ids(tables: Sequence[pa.Table], n_inputs: int = 3) -> np.ndarray:
    """``(row_0, ..., row_{N-1})`` of every result, sorted (a multiset as one array)."""
    parts = [np.stack([np.asarray(t.column(f"row_{j}").to_numpy(), np.int64)
                       for j in range(n_inputs)], axis=1) for t in tables if t.num_rows]
    ids = np.concatenate(parts) if parts else np.empty((0, n_inputs), np.int64)
    return ids[np.lexsort(ids.T[::-1])]


def oracle_ids(table: pa.Table, n_groups: int, n_inputs: int = 3,
               within: int | None = None) -> np.ndarray:
    """:func:`result_ids` of the batch oracle, computed one partition group at a time."""
    groups = make_join(n_groups, n_inputs).group_of(table)
    parts = []
    for g in np.unique(groups[groups >= 0]):
        rows = reference_join(table.filter(pa.array(groups == g)), KEYS, n_inputs, within)
        if rows:
            parts.append(np.array([[r[f"row_{j}"] for j in range(n_inputs)] for r in rows],
                                  np.int64))
    ids = np.concatenate(parts) if parts else np.empty((0, n_inputs), np.int64)
    return ids[np.lexsort(ids.T[::-1])]


def same(ids: np.ndarray, expected: np.ndarray) -> bool:
    """True if two sorted id arrays are the same multiset."""
    return ids.shape == expected.shape and bool((ids == expected).all())
