"""``dedup(col, ..., within=<duration>)``: drop repeats of a key's values within a time horizon.

A tuple is dropped when an earlier *kept* tuple of the same key has equal values in the named
columns (nulls equal nulls, ``-0.0`` equals ``0.0`` and NaN equals NaN, as in Spark's
``dropDuplicates``) and this tuple's ``ts < kept_ts + within``. The kept occurrence anchors the
horizon: once it has expired, the next occurrence is kept and anchors a new one. Kept tuples leave
unchanged (no column is added), in input order (a partitioned stateful operator, Prasaad et al.
(2018), §2.1; the decision for a tuple depends only on the tuples before it in the total order).

State: one entry per distinct ``(key, values)`` -- the key and column values themselves, their
stable hash (which only narrows the search: entries are equal when their values are,
:func:`~spark_stream_sched.runtime.keyed.groups.find`) and the ts of its anchor. An entry is
purged once
``kept_ts + within <= bound``: every later tuple has ``ts >= bound`` and would be kept anyway, so
memory is bounded by the distinct values seen within one horizon.

Vectorised without a per-tuple loop: within each entry the kept tuples form the chain
``root -> next(root) -> ...`` where ``next(j)`` is the first later tuple with
``ts >= ts_j + within`` (one ``np.searchsorted``), and the chain is marked by pointer doubling
in ``log2(n)`` NumPy steps. A carried anchor enters as a virtual first tuple of its entry.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.keyed.base import register
from spark_stream_sched.runtime.keyed.groups import (
    KeyGroups,
    RowOperator,
    key_fields,
    lookup,
    merge_state,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.packets import event_times


def next_after(group: np.ndarray, ts: np.ndarray, starts: np.ndarray, within: int) -> np.ndarray:
    """Per node, the first later node of its group with ``ts >= ts_j + within`` (or -1).

    The nodes must be sorted by ``(group, ts)``; ``starts`` gives each group's first node.
    """
    levels = np.unique(np.concatenate((ts, ts + within)))
    span = len(levels) + 1
    have = group * span + np.searchsorted(levels, ts)
    want = group * span + np.searchsorted(levels, ts + within)
    found = np.searchsorted(have, want, "left")
    return np.where(found < starts[group + 1], found, -1)


def chain_from_roots(roots: np.ndarray, jump: np.ndarray) -> np.ndarray:
    """Mask of the nodes reachable from ``roots`` along ``jump`` (-1: end), by pointer doubling.

    After round ``r`` the mask holds every node at distance ``< 2**(r+1)`` from a root.
    """
    reached = np.zeros(len(jump), dtype=bool)
    reached[roots] = True
    jump = jump.copy()
    while (jump >= 0).any():
        hop = jump[reached & (jump >= 0)]
        reached[hop] = True
        jump = np.where(jump >= 0, jump[np.maximum(jump, 0)], -1)
    return reached


@register
class Dedup(RowOperator):
    """``dedup(col, ..., within=<duration>)`` (see the module docstring).

    Raises
    ------
    ConfigError
        Naming the stage: no column, an unknown column, an alias, a keyword other than
        ``within``, a missing or malformed ``within``.
    """

    name = "dedup"

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        usage = "e.g. dedup(url, within=10 minutes)"
        if not stage.args:
            raise stage.fail(f"name at least one column whose repeats are dropped; {usage}")
        unknown = sorted(k for k, _ in stage.kwargs if k != "within")
        if unknown or stage.alias:
            raise stage.fail(f"only the keyword 'within' is accepted and no alias; {usage}")
        within = stage.keyword("within")
        if within is None:
            raise stage.fail(f"'within' is required (the horizon of a repeat); {usage}")
        try:
            self.within = parse_duration(within, "within")
        except ConfigError as exc:
            raise stage.fail(str(exc)) from exc
        self.columns = list(stage.args)
        for name in [*self.columns, *key_columns, ts_column]:
            self.require_column(name)
        self.added = []
        self._entry = [*key_columns, *self.columns]
        self._seen = pa.schema([*key_fields(input_schema, self._entry),
                                ("kept_ts", pa.int64())]).empty_table()

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """The rows that are not repeats; then purge the anchors ``bound`` has expired."""
        n = rows.num_rows
        entries = KeyGroups.of(rows, self._entry)
        entry = entries.group
        slot = lookup(self._seen, entries)
        anchored = np.flatnonzero(slot >= 0)
        kept_ts = np.asarray(self._seen.column("kept_ts").to_numpy(), np.int64)
        # Nodes: the carried anchors first (virtual tuples), then the rows, sorted by entry.
        group = np.concatenate((anchored, entry))
        ts = np.concatenate((kept_ts[slot[anchored]],
                             event_times(rows, self.ts_column, f"operator {self.stage.text()!r}")))
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(len(entries) + 1))
        jump = next_after(group[order], ts[order], starts, self.within)
        kept = chain_from_roots(starts[:-1], jump)
        keep = np.zeros(n, dtype=bool)
        real = order >= len(anchored)
        keep[order[real] - len(anchored)] = kept[real]
        if n:
            last_kept = np.maximum.reduceat(np.where(kept, ts[order], np.iinfo(np.int64).min),
                                            starts[:-1])
            self._seen = merge_state(self._seen, entries.keys.append_column(
                "kept_ts", pa.array(last_kept, pa.int64())), slot[anchored])
        if bound is not None:
            alive = np.asarray(self._seen.column("kept_ts").to_numpy(), np.int64) > (
                bound - self.within)
            self._seen = self._seen.filter(pa.array(alive))
        return self.emit(rows.filter(pa.array(keep)), [])

    def state_tables(self) -> dict[str, pa.Table]:
        """One row per live ``(key, values)`` entry: its hash, values and anchor ts."""
        return {"dedup": self._seen}

    def load_state(self, tables: dict[str, pa.Table]) -> None:
        """Adopt a restored state table."""
        self._seen = tables["dedup"]
