"""Shared machinery of the row operators: grouping a packet by key, per-key state tables, snapshots.

A partitioned stateful operator (seed 002 §2.1) keeps state per key. Here a key is identified
by its stable 64-bit hash (:func:`~spark_stream_sched.runtime.keys.key_hash`: nulls are one
key, ``-0.0`` and ``0.0`` are one key, as in Spark's grouping), and state lives in an Arrow
table sorted by that hash, so a packet's keys are found with one ``np.searchsorted`` and the
state is snapshotted as typed Arrow columns, never pickled.

:class:`KeyGroups` groups the rows of one :meth:`~.base.KeyedOperator.update` packet by key with
``np.unique`` and a stable argsort: the rows of each key stay in the total order, so an operator
needs at most one Python iteration per distinct key, never one per tuple.
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
from spark_stream_sched.runtime.keys import key_hash
from spark_stream_sched.runtime.state.snapshot import decode, encode

#: Name of the key-hash column of every state table.
KEY = "__key"


@dataclass(frozen=True)
class KeyGroups:
    """The rows of one packet grouped by key hash, each group in input (total) order.

    Attributes
    ----------
    hashes
        Distinct key hashes of the packet, ascending (uint64).
    order
        Row indices grouped by key (group ``g`` is ``order[starts[g]:starts[g + 1]]``),
        ascending within each group.
    starts
        Start of each group in ``order``, plus ``len(order)`` at the end.
    group
        Group number of every row (``hashes[group[i]]`` is row ``i``'s key hash).
    """

    hashes: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    group: np.ndarray

    @classmethod
    def of(cls, table: pa.Table, columns: list[str]) -> KeyGroups:
        """Group the rows of ``table`` by the values of ``columns`` (no columns: one group)."""
        hashes, group = np.unique(key_hash(table, columns), return_inverse=True)
        group = np.asarray(group, dtype=np.int64).reshape(-1)
        order = np.argsort(group, kind="stable")
        starts = np.searchsorted(group[order], np.arange(len(hashes) + 1))
        return cls(hashes, order, starts, group)

    def __len__(self) -> int:
        return len(self.hashes)

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


def lookup(state_keys: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Position of each of ``hashes`` in the sorted ``state_keys`` (-1 where absent)."""
    pos = np.searchsorted(state_keys, hashes)
    found = pos < len(state_keys)
    found[found] = state_keys[pos[found]] == hashes[found]
    return np.where(found, pos, -1).astype(np.int64)


def merge_state(old: pa.Table, new: pa.Table, then_by: tuple[str, ...] = ()) -> pa.Table:
    """``new`` rows plus the rows of ``old`` whose key is not in ``new``, sorted by key.

    ``then_by`` names further columns to sort by (a key with several state rows).
    """
    keep = pc.invert(pc.is_in(old.column(KEY), value_set=new.column(KEY).combine_chunks()))
    merged = pa.concat_tables([old.filter(keep), new.cast(old.schema)])
    order = pc.sort_indices(merged, [(name, "ascending") for name in (KEY, *then_by)])
    return merged.take(order).combine_chunks()


def state_keys(state: pa.Table) -> np.ndarray:
    """The key hashes of a state table as a NumPy uint64 array."""
    return np.asarray(state.column(KEY).to_numpy(), dtype=np.uint64)


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
            "aggregates": list(self.aggregates),
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
