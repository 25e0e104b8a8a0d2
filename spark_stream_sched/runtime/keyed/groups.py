"""Shared machinery of the row operators: grouping a packet by key, per-key state tables, snapshots.

A partitioned stateful operator (Prasaad, Ramalingam & Rajan, *Scaling Ordered Stream Processing
on Shared-Memory Multicores*, §2.1) keeps state per key. Keys are *equal* when their values are
(:func:`~spark_stream_sched.runtime.keys.key_ids`: nulls are one key, ``-0.0`` and ``0.0`` are
one key, NaN equals NaN, as in Spark's grouping); their stable 64-bit hash
(:func:`~spark_stream_sched.runtime.keys.key_hash`) only narrows the search. State lives in an
Arrow table that holds, per key, the hash (:data:`KEY`) and the key's values (:func:`key_fields`:
``__k0``, ``__k1``, ... in canonical form), sorted by hash; a packet's keys are found with one
``np.searchsorted`` over the hashes, and every candidate with an equal hash is confirmed by
comparing values (:func:`find`), so two keys that share a hash never share state. The state is
snapshotted as typed Arrow columns, never pickled.

:class:`KeyGroups` groups the rows of one :meth:`~.base.KeyedOperator.update` packet by key
value (:func:`~spark_stream_sched.runtime.keys.key_ids`) with a stable argsort: the rows of each
key stay in the total order, so an operator needs at most one Python iteration per distinct
key, never one per tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.keys import (
    canonical,
    canonical_type,
    equal_keys,
    key_hash,
    key_ids,
)
from spark_stream_sched.runtime.state.snapshot import decode, encode

#: Name of the key-hash column of every state table.
KEY = "__key"
#: Version of the row operators' state tables; 1 identified keys by their hash alone.
STATE_FORMAT = 2


def key_names(n: int) -> list[str]:
    """Names of the key-value columns of a state table with ``n`` key columns."""
    return [f"__k{i}" for i in range(n)]


def key_fields(schema: pa.Schema, columns: list[str]) -> list[pa.Field]:
    """The key part of a state table: :data:`KEY` (uint64) and each key column's canonical value."""
    pairs = zip(key_names(len(columns)), columns, strict=True)
    return [pa.field(KEY, pa.uint64()),
            *(pa.field(name, canonical_type(schema.field(c).type)) for name, c in pairs)]


@dataclass(frozen=True)
class KeyGroups:
    """The rows of one packet grouped by key value, each group in input (total) order.

    Attributes
    ----------
    keys
        One row per group: its hash (:data:`KEY`) and canonical key values (``__k0``, ...),
        the key part of a state table (:func:`key_fields`). Distinct groups may share a hash.
    order
        Row indices grouped by key (group ``g`` is ``order[starts[g]:starts[g + 1]]``),
        ascending within each group.
    starts
        Start of each group in ``order``, plus ``len(order)`` at the end.
    group
        Group number of every row.
    """

    keys: pa.Table
    order: np.ndarray
    starts: np.ndarray
    group: np.ndarray

    @classmethod
    def of(cls, table: pa.Table, columns: list[str]) -> KeyGroups:
        """Group the rows of ``table`` by the values of ``columns`` (no columns: one group).

        Groups are numbered in ascending hash order (state lookups then search sorted hashes).
        """
        hashes = key_hash(table, columns)
        group = key_ids(table, columns, hashes)
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(int(group.max(initial=-1)) + 2))
        head = order[starts[:-1]]  # the first row of every group
        keys = {KEY: pa.array(hashes[head], pa.uint64())}
        keys.update({n: canonical(table.column(c).take(pa.array(head, pa.int64())))
                     for n, c in zip(key_names(len(columns)), columns, strict=True)})
        return cls(pa.table(keys), order, starts, group)

    def __len__(self) -> int:
        return int(self.keys.num_rows)

    @property
    def hashes(self) -> np.ndarray:
        """The key hash of every group (uint64)."""
        return state_keys(self.keys)

    def rows(self, g: int) -> np.ndarray:
        """Row indices of group ``g`` in input order."""
        return self.order[self.starts[g]:self.starts[g + 1]]

    def rank(self) -> np.ndarray:
        """0-based position of every row within its group (int64)."""
        rank = np.empty(len(self.order), dtype=np.int64)
        rank[self.order] = np.arange(len(self.order)) - np.repeat(self.starts[:-1],
                                                                  np.diff(self.starts))
        return rank

    def last_rows(self) -> np.ndarray:
        """Index of the last row of every group."""
        return self.order[self.starts[1:] - 1] if len(self.order) else self.order


def find(state: pa.Table, groups: KeyGroups) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(group, state row)`` pair whose keys are equal, ordered by group then state row.

    ``state`` is sorted by :data:`KEY` and has the key columns of :func:`key_fields`. The hash
    picks the candidates (usually one per group); their values decide.
    """
    hashes = state_keys(state)
    lo = np.searchsorted(hashes, groups.hashes, "left")
    count = np.searchsorted(hashes, groups.hashes, "right") - lo
    which = np.repeat(np.arange(len(groups)), count)
    row = lo[which] + np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
    names = groups.keys.column_names[1:]
    if not names:  # no key columns: one key
        return which, row
    same = equal_keys(state.select(names).take(pa.array(row, pa.int64())),
                      groups.keys.select(names).take(pa.array(which, pa.int64())))
    return which[same], row[same]


def lookup(state: pa.Table, groups: KeyGroups) -> np.ndarray:
    """The state row of each group's key, -1 where absent (``state`` has one row per key)."""
    which, row = find(state, groups)
    slot = np.full(len(groups), -1, dtype=np.int64)
    slot[which] = row
    return slot


def merge_state(old: pa.Table, new: pa.Table, replaced: np.ndarray,
                then_by: tuple[str, ...] = ()) -> pa.Table:
    """``old`` without its rows at positions ``replaced``, plus ``new``, sorted by hash (stable).

    ``then_by`` names further columns to sort by (a key with several state rows).
    """
    keep = np.ones(old.num_rows, dtype=bool)
    keep[replaced] = False
    merged = pa.concat_tables([old.filter(pa.array(keep)), new.cast(old.schema)])
    order = pc.sort_indices(merged, [(name, "ascending") for name in (KEY, *then_by)])
    return merged.take(order).combine_chunks()


def state_keys(state: pa.Table) -> np.ndarray:
    """The key hashes of a state table as a NumPy uint64 array."""
    return np.asarray(state.column(KEY).to_numpy(), dtype=np.uint64)


def check_format(meta: dict[str, Any], operator: str) -> None:
    """StateError naming ``operator`` unless the snapshot's state is :data:`STATE_FORMAT`."""
    found = meta.get("format", 1)
    if found != STATE_FORMAT:
        raise StateError(f"snapshot of operator {operator!r} has state format {found}, which "
                         f"identified keys by their 64-bit hash alone; this version keeps key "
                         f"values (format {STATE_FORMAT}) and cannot recover them from a hash. "
                         f"Start the query with a new checkpoint location, or finish the old "
                         f"one with the release that wrote it")


def take(values: pa.Array, src: np.ndarray) -> pa.Array:
    """``values[src]`` with null wherever ``src`` is negative."""
    return values.take(pa.array(np.maximum(src, 0), mask=src < 0))


def column(table: pa.Table, name: str) -> pa.Array:
    """One column of ``table`` as a single Arrow array."""
    return table.column(name).combine_chunks()


class RowOperator(KeyedOperator):
    """Base of the built-in row operators: column checks, output schema, snapshot plumbing.

    Subclasses set :attr:`added` (the fields they append) in ``__init__``, keep their state in
    Arrow tables returned by :meth:`state_tables`, and rebuild it in :meth:`load_state`. A
    snapshot holds the stage text parts, the key and ts columns, the input schema (as an empty
    Arrow table, so types survive exactly) and the state tables.
    """

    added: list[pa.Field]

    #: Snapshot kind prefix; the full kind is ``keyed.<name>``.
    KIND: ClassVar[str] = "keyed."

    def require_column(self, name: str, what: str = "column") -> pa.DataType:
        """The type of input column ``name`` (ConfigError naming the stage if unknown)."""
        if name not in self.input_schema.names:
            public = [n for n in self.input_schema.names if not n.startswith("__")]
            raise self.stage.fail(f"unknown {what} {name!r}; columns are {public}")
        return self.input_schema.field(name).type

    def check_new_names(self) -> None:
        """Refuse added columns that clash with input columns or with each other."""
        seen: set[str] = set()
        for field in self.added:
            if field.name in self.input_schema.names or field.name in seen:
                raise self.stage.fail(f"output column {field.name!r} already exists; "
                                      f"name it with 'as <name>'")
            seen.add(field.name)

    @property
    def output_schema(self) -> pa.Schema:
        """The input schema followed by :attr:`added`."""
        return pa.schema(list(self.input_schema) + self.added)

    def emit(self, rows: pa.Table, arrays: list[pa.Array]) -> pa.Table:
        """``rows`` with ``arrays`` appended as the :attr:`added` columns."""
        rows = rows.cast(self.input_schema)
        for field, array in zip(self.added, arrays, strict=True):
            rows = rows.append_column(field, array.cast(field.type))
        return rows

    # -- state and snapshots ------------------------------------------------------------------

    def state_tables(self) -> dict[str, pa.Table]:
        """The operator's state as Arrow tables (stateless operators: none)."""
        return {}

    def load_state(self, tables: dict[str, pa.Table]) -> None:
        """Adopt state tables produced by :meth:`state_tables` (schemas checked)."""

    def snapshot(self) -> bytes:
        """Snapshot bytes (see :mod:`~spark_stream_sched.runtime.state.snapshot`)."""
        meta: dict[str, Any] = {
            "args": list(self.stage.args), "kwargs": [list(kv) for kv in self.stage.kwargs],
            "alias": self.stage.alias, "keys": self.key_columns, "ts": self.ts_column,
            "aggregates": list(self.aggregates), "format": STATE_FORMAT,
        }
        tables = {"__schema": self.input_schema.empty_table(), **self.state_tables()}
        return encode(self.KIND + self.name, meta, tables)

    @classmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        """Rebuild the operator from :meth:`snapshot` bytes (StateError if corrupt)."""
        meta, tables = decode(data, cls.KIND + cls.name)
        try:
            stage = StageSpec(cls.name, tuple(meta["args"]),
                              tuple((str(k), str(v)) for k, v in meta["kwargs"]), meta["alias"])
            op = cls(stage, tables.pop("__schema").schema, list(meta["keys"]), str(meta["ts"]),
                     tuple(meta["aggregates"]))
            expected = op.state_tables()
            if expected:
                check_format(meta, cls.name)
            for name, table in expected.items():
                if name not in tables or not tables[name].schema.equals(table.schema):
                    raise StateError(
                        f"snapshot of operator {cls.name!r}: state table {name!r} is missing or "
                        f"has another layout than this version writes (e.g. running sums of "
                        f"floats are exact partials, no longer float64); continue the query "
                        f"with the version that wrote it, or restart it from a new checkpoint "
                        f"location")
            op.load_state(tables)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"snapshot of operator {cls.name!r} does not match its format "
                             f"({exc}); it was not written by this version") from exc
        return op

    @property
    def state_bytes(self) -> int:
        """Bytes held by the state tables."""
        return sum(t.nbytes for t in self.state_tables().values())
