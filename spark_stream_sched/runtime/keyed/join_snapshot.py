"""Snapshots of the join operator (:class:`~.join.Join`): its whole state as checksummed bytes.

A snapshot folds the spilled generations in (read back and checksum-verified), so it is
self-contained: it survives the loss of the spill directory and the deletion of generation
files by a later clean-up. :func:`restore_join` writes them back as generations in the new
operator's own spill directory (held results too). The price: a snapshot is as large as the
whole state. Never pickle: :func:`~spark_stream_sched.runtime.state.snapshot.encode`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.keyed.join_state import (
    JoinCounts,
    PartitionGroup,
    SpillStore,
    fresh,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.state.snapshot import decode, encode

KIND = "keyed.join"


def snapshot_join(op: Any) -> bytes:
    """Snapshot bytes of ``op``: definition, counters, memory parts, generations, held results.

    ``op`` is a :class:`~.join.Join` (typed loosely: this module is below it, no import cycle).
    """
    groups, tables = fold_groups(op._groups, op._spill, op._stored)
    held, tables["held"] = op._held.fold()
    meta: dict[str, Any] = {
        "args": list(op.stage.args), "kwargs": [list(kv) for kv in op.stage.kwargs],
        "keys": op.key_columns, "ts": op.ts_column, "aggregates": list(op.aggregates),
        "budget": op.memory_budget, "spill_dir": op.spill_dir, "n_groups": op.n_groups,
        "fraction": op.push_fraction, "inactive_after": op.inactive_after,
        "now": op._now, "counts": asdict(op.counts),
        "groups": groups, "ordered": op.ordered, "bound": op._bound, "held": held,
    }
    return encode(KIND, meta, {"schema": op.input_schema.empty_table(), **tables})


def restore_join(cls: Any, data: bytes) -> Any:
    """Rebuild a join from :func:`snapshot_join` bytes (StateError if corrupt or foreign)."""
    meta, tables = decode(data, KIND)
    try:
        return _rebuild(cls, meta, tables)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"snapshot of operator 'join' does not match its format ({exc}); "
                         f"it was not written by this version") from exc


def _rebuild(cls: Any, meta: dict[str, Any], tables: dict[str, pa.Table]) -> Any:
    stage = StageSpec(cls.name, tuple(meta["args"]),
                      tuple((str(k), str(v)) for k, v in meta["kwargs"]))
    op = cls(stage, tables["schema"].schema, list(meta["keys"]), str(meta["ts"]),
             tuple(meta["aggregates"]), memory_budget=meta["budget"],
             spill_dir=meta["spill_dir"], n_groups=int(meta["n_groups"]),
             push_fraction=float(meta["fraction"]), inactive_after=meta["inactive_after"],
             ordered=bool(meta.get("ordered", False)))
    op._now, op._bound = meta["now"], meta.get("bound")
    counts = meta.get("counts") or {"pushes": meta["pushes"], "cleanups": meta["cleanups"]}
    op.counts = JoinCounts(**counts)  # older snapshots kept only the two counters
    unfold_groups(op._groups, op._spill, op._empty, meta["groups"], tables)
    if "held" in tables:
        op._held.unfold(meta["held"], tables["held"])
    return op


def fold_groups(groups: list[PartitionGroup], spill: SpillStore, schema: pa.Schema
                ) -> tuple[list[Any], dict[str, pa.Table]]:
    """Per-group snapshot metadata, and the memory parts and generations as two tables.

    Generations are read back from disk (checksum verified); both tables are in group, then
    generation order.
    """
    spilled = [spill.read(x, schema) for g in groups for x in g.generations]
    meta = [[g.produced, g.last_insert, g.memory.num_rows,
             [[x.rows, x.max_ms, x.floor] for x in g.generations]] for g in groups]
    return meta, {"memory": pa.concat_tables([schema.empty_table(), *(g.memory for g in groups)]),
                  "spilled": pa.concat_tables([schema.empty_table(), *spilled])}


def unfold_groups(groups: list[PartitionGroup], spill: SpillStore, empty: pa.Table,
                  meta: list[Any], tables: dict[str, pa.Table]) -> None:
    """Inverse of :func:`fold_groups`: memory parts back in memory, generations back on disk.

    ``empty``: the join's empty table of its stored rows, given to every empty group (most of
    them, in a sink).
    """
    memory, spilled, at, at_spilled = tables["memory"], tables["spilled"], 0, 0
    schema = empty.schema
    if not (memory.schema.equals(schema) and spilled.schema.equals(schema)):
        raise StateError("the join snapshot's state tables have another schema")
    for group, (produced, last, rows, generations) in zip(groups, meta, strict=True):
        group.produced, group.last_insert = int(produced), last
        group.memory = fresh(memory.slice(at, rows)) if rows else empty
        at += rows
        for count, max_ms, *floor in generations:  # older snapshots have no floor
            part = fresh(spilled.slice(at_spilled, count))
            group.generations.append(spill.write(group.gid, part, int(max_ms),
                                                 int(floor[0]) if floor else None))
            at_spilled += count
