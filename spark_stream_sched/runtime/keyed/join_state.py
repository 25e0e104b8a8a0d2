"""State of the join: partition groups, their on-disk generations and the push policy.

See Liu & Rundensteiner (2005), §4.

A :class:`PartitionGroup` (Liu & Rundensteiner 2005, §4.1, fig. 8b) holds the stored tuples of
*every* input whose key falls into one partition id, so it is the unit that is pushed to disk and
cleaned up. It records the seed's statistics (§4.3):

``P_s`` (:attr:`PartitionGroup.size`)
    bytes of its memory-resident tuples: their Arrow buffer sizes in the canonical layout
    (:func:`arrow_bytes`), so the figure is the same after a snapshot round trip;
``P_o`` (:attr:`PartitionGroup.produced`)
    results it has produced (normal run and clean-up);
``T_u`` (:attr:`PartitionGroup.last_insert`)
    event time (ms) of its last inserted tuple -- never wall-clock, so spilling decisions and
    therefore the output order are the same on every run.

Pushing (Liu & Rundensteiner 2005, §4.1) writes the group's memory part as one *generation*, a
checksummed Arrow IPC snapshot file
(:func:`~spark_stream_sched.runtime.state.snapshot.write_snapshot`); the memory part starts empty
again. Generations of a group are numbered in push order, and because a group's tuples arrive in the
total order, generation ``t`` holds exactly the group's tuples that arrived between push ``t-1`` and
push ``t`` (an *epoch*; the memory part is the last one).

:func:`push_order` is the throughput-oriented choice of §4.3: first the groups inactive for
longer than ``theta_t`` (event time), oldest ``T_u`` first, then the least productive (largest
``P_s/P_o``; ``P_o = 0`` counts as infinite), ties by group id.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import spill_error
from spark_stream_sched.runtime.state.snapshot import read_snapshot, write_snapshot

#: Snapshot kind of a generation file.
GENERATION_KIND = "keyed.join.generation"
#: Parent directory of the spill directories of joins built without one (option
#: ``spillLocation``; None: the system temp directory), set by :func:`spilling_under`.
SPILL_PARENT: ContextVar[str | None] = ContextVar("spill_parent", default=None)


@contextlib.contextmanager
def spilling_under(parent: str | None) -> Iterator[None]:
    """Joins built (or restored) in this context without a ``spill_dir`` spill under ``parent``.

    A query's execution option, not its definition: it is never recorded in a snapshot, so a
    restart may spill elsewhere. ``None`` keeps the system temp directory.
    """
    token = SPILL_PARENT.set(parent)
    try:
        yield
    finally:
        SPILL_PARENT.reset(token)


@dataclass
class Generation:
    """One push of a group's memory part: its file, row count and largest event time.

    ``floor`` is a lower bound, known at the push, on the event time of every tuple that arrives
    after it (the larger of ``max_ms`` and the ready bound then): a result this generation misses
    is completed by such a tuple, so its ts is ``>= floor`` (:mod:`.join_hold`).
    """

    path: str
    rows: int
    max_ms: int
    floor: int
    #: Arrow bytes of the pushed tuples (:func:`arrow_bytes`), what they took in memory.
    size: int = 0


@dataclass
class JoinCounts:
    """What the join's disk adaptation and clean-up stage did (:attr:`~.join.Join.stats`).

    ``pushed_bytes`` are the generations' bytes as they took in memory (``P_s`` at each push);
    ``held_pushed_bytes`` those of held results written by the reorder buffer;
    ``cleanup_slices`` counts the key slices the clean-ups read back one at a time
    (:func:`~.cleanup.key_slices`), ``cleanup_universe_bytes`` is the largest slice's tuples;
    ``peak_bytes`` is the most the join held in memory at once where it counts (after each
    update's pushes, at each clean-up slice and each step of the final merge): its state (memory
    parts and held results), plus the slice being cleaned up and its results, or the merge's
    buffer; ``cleanup_seconds`` is wall time (a figure, never a decision).
    """

    pushes: int = 0
    pushed_bytes: int = 0
    held_pushed_bytes: int = 0
    cleanups: int = 0
    cleanup_results: int = 0
    cleanup_slices: int = 0
    cleanup_universe_bytes: int = 0
    peak_bytes: int = 0
    cleanup_seconds: float = 0.0


def _libc() -> ctypes.CDLL | None:
    """The C library when it has glibc's ``malloc_trim`` (None elsewhere: musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def release_unused() -> None:
    """Hand the memory freed by Arrow's pool and by ``malloc`` back to the operating system.

    Arrow's default pool (mimalloc in pyarrow 26's Linux wheels) and glibc's ``malloc``
    (NumPy's arrays) keep freed pages for reuse. The join calls this after each step that
    dropped up to a budget's worth of tables (a clean-up slice, a step of the final merge), so
    that the RSS at the end of input stays near the normal run's rather than growing with
    what the clean-up read back (docs/adaptation.md, "Memory of a budgeted join"). It changes
    no result; without ``malloc_trim`` only Arrow's pool is asked.
    """
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def arrow_bytes(table: pa.Table) -> int:
    """Bytes of ``table``'s Arrow buffers in the canonical layout.

    Fixed-width values, offsets and string data, plus a validity bitmap where a column has
    nulls; so the figure depends only on the values, not on how the table was built (slices,
    padding, an all-valid bitmap or none), and it is the same after a snapshot round trip.
    """
    total = 0
    for col in table.columns:
        n, kind = len(col), col.type
        total += (n + 7) // 8 if col.null_count else 0
        if pa.types.is_string(kind) or pa.types.is_binary(kind):
            total += 4 * (n + 1) + int(pc.sum(pc.binary_length(col)).as_py() or 0)
        elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
            total += 8 * (n + 1) + int(pc.sum(pc.binary_length(col)).as_py() or 0)
        elif pa.types.is_primitive(kind):
            total += (n * kind.bit_width + 7) // 8
        else:  # nested and other types: as Arrow counts them
            total += int(col.nbytes)
    return total


class SizedTable:
    """Holder of an in-memory table whose Arrow size (:func:`arrow_bytes`) is kept current."""

    _memory: pa.Table
    _size: int

    @property
    def memory(self) -> pa.Table:
        """The table held in memory (one chunk, in order)."""
        return self._memory

    @memory.setter
    def memory(self, table: pa.Table) -> None:
        self._memory = table
        self._size = arrow_bytes(table) if table.num_rows else 0

    @property
    def size(self) -> int:
        """Bytes of :attr:`memory` in the canonical layout (:func:`arrow_bytes`)."""
        return self._size


class PartitionGroup(SizedTable):
    """One partition group's join state and statistics (see the module docstring).

    :attr:`memory` holds its memory-resident tuples in the total order; :attr:`size` is ``P_s``.
    """

    def __init__(self, gid: int, memory: pa.Table, produced: int = 0,
                 last_insert: int | None = None) -> None:
        self.gid = gid
        self.produced = produced
        self.last_insert = last_insert
        self.generations: list[Generation] = []
        self.memory = memory

    @property
    def productivity(self) -> float:
        """``P_s / P_o`` (Liu & Rundensteiner 2005, §4.3); large: unproductive; no output: inf."""
        return self.size / self.produced if self.produced else math.inf

    @property
    def hold_from(self) -> int | None:
        """Least ts a missing result of this group can have (None: nothing on disk)."""
        return self.generations[0].floor if self.generations else None

    def insert(self, rows: pa.Table, last_ms: int) -> None:
        """Store ``rows`` (in the total order, after every stored tuple); ``T_u = last_ms``."""
        if rows.num_rows:
            self.memory = pa.concat_tables([self.memory, rows]).combine_chunks()
            self.last_insert = last_ms

    def keep(self, mask: pa.Array) -> None:
        """Keep only the memory tuples where ``mask`` is true (order kept)."""
        self.memory = self.memory.filter(mask).combine_chunks()

    def stats(self) -> dict[str, int | float | None]:
        """The group's statistics as plain values."""
        return {"group": self.gid, "P_s": self.size, "P_o": self.produced,
                "T_u": self.last_insert, "rows": self.memory.num_rows,
                "generations": len(self.generations),
                "spilled_rows": sum(g.rows for g in self.generations)}


def push_order(groups: list[PartitionGroup], now: int | None,
               inactive_after: int | None) -> list[PartitionGroup]:
    """Groups with memory-resident tuples in the order they are pushed.

    See Liu & Rundensteiner (2005), §4.3.
    """
    live = [g for g in groups if g.memory.num_rows]

    def inactive(g: PartitionGroup) -> bool:
        return (inactive_after is not None and now is not None and g.last_insert is not None
                and now - g.last_insert > inactive_after)

    idle = sorted((g for g in live if inactive(g)), key=lambda g: (g.last_insert, g.gid))
    busy = sorted((g for g in live if not inactive(g)), key=lambda g: (-g.productivity, g.gid))
    return idle + busy


def choose_pushes(groups: list[PartitionGroup], budget: int, fraction: float, now: int | None,
                  inactive_after: int | None) -> list[PartitionGroup]:
    """Groups to push when the memory-resident bytes exceed ``budget`` (none if they fit).

    In :func:`push_order`, until both at least ``fraction`` of the memory bytes are pushed (the
    paper's push percentage, Liu & Rundensteiner (2005), §4.4) and the rest fits the budget.
    """
    total = sum(g.size for g in groups)
    if total <= budget:
        return []
    chosen, pushed = [], 0
    for group in push_order(groups, now, inactive_after):
        if pushed >= fraction * total and total - pushed <= budget:
            break
        chosen.append(group)
        pushed += group.size
    return chosen


class SpillStore:
    """Generation files of one join operator, in a private directory under ``parent``.

    The directory is created at the first push (``tempfile.mkdtemp`` with prefix ``join-spill-``
    under ``parent``, created if needed) and removed by :meth:`close`. ``parent`` None takes the
    :func:`spilling_under` directory current at construction, else the system temp directory
    (:func:`tempfile.gettempdir`: ``$TMPDIR``, else ``/tmp`` on Linux).

    **Owner and deletion rule.** The directory and every file in it belong to this store alone
    (a snapshot folds the files in, a restore or a group's move writes its own): when the store
    is garbage-collected -- the operator a micro-batch restored and snapshotted again, a query's
    pipeline at its end; a join refers to itself, so Python's cyclic collector frees it -- or
    the process exits normally, the directory is removed with what it still holds. A process
    killed by a signal leaves its directory behind; it is named ``join-spill-*`` under
    ``parent`` (option ``spillLocation``).
    """

    def __init__(self, parent: str | None) -> None:
        self.parent = parent if parent is not None else SPILL_PARENT.get()
        self.directory: str | None = None
        self.written = 0
        self._remove: Callable[[], Any] | None = None  # a weakref.finalize

    def write(self, gid: int, table: pa.Table, max_ms: int, floor: int | None = None
              ) -> Generation:
        """Write ``table`` as the next generation of group ``gid`` (SpillError naming the file).

        ``floor`` defaults to ``max_ms`` (always a valid lower bound of later event times).
        """
        path = self.put(f"group-{gid:04d}-gen", GENERATION_KIND,
                        {"group": gid, "rows": table.num_rows}, table)
        return Generation(path, table.num_rows, max_ms, max_ms if floor is None else floor,
                          arrow_bytes(table) if table.num_rows else 0)

    def put(self, name: str, kind: str, meta: dict[str, Any], table: pa.Table) -> str:
        """Write ``table`` as the next numbered file ``<name>-<n>.arrow``; its path."""
        if self.directory is None:
            try:
                if self.parent is not None:
                    os.makedirs(self.parent, exist_ok=True)
                self.directory = tempfile.mkdtemp(prefix="join-spill-", dir=self.parent)
            except OSError as exc:
                raise spill_error(self.parent or tempfile.gettempdir(), exc) from exc
            self._remove = weakref.finalize(self, shutil.rmtree, self.directory, True)
        path = os.path.join(self.directory, f"{name}-{self.written:06d}.arrow")
        write_snapshot(path, kind, meta, {"tuples": table}, sync_dir=False)
        self.written += 1
        return path

    def read(self, generation: Generation, schema: pa.Schema) -> pa.Table:
        """The tuples of ``generation`` (StateError if missing, corrupt or of another schema)."""
        return self.get(generation.path, GENERATION_KIND, "join generation", schema,
                        generation.rows)

    def get(self, path: str, kind: str, what: str, schema: pa.Schema, rows: int) -> pa.Table:
        """The table :meth:`put` wrote to ``path`` (StateError if missing, corrupt or changed)."""
        advice = "the join's spill directory was changed while the query ran; restart it"
        _, tables = read_snapshot(path, kind, what, advice)
        table = tables.get("tuples")
        if table is None or not table.schema.equals(schema) or table.num_rows != rows:
            raise StateError(f"{what} {path} does not hold the expected rows; {advice}")
        return table

    def delete(self, generation: Generation | str) -> None:
        """Remove a generation (or another spilled file) that is no longer needed."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(generation if isinstance(generation, str) else generation.path)

    def close(self) -> None:
        """Remove the spill directory and every file still in it."""
        if self._remove is not None:
            self._remove()  # shutil.rmtree(directory, ignore_errors=True), once
            self._remove = None
        self.directory = None


def drop_generations(groups: list[PartitionGroup], spill: SpillStore) -> None:
    """Delete every group's generation files and the spill directory."""
    for group in groups:
        for generation in group.generations:
            spill.delete(generation)
        group.generations = []
    spill.close()


def fresh(table: pa.Table) -> pa.Table:
    """``table`` in freshly allocated buffers (a slice would keep the whole snapshot alive)."""
    if not table.num_rows:
        return table.schema.empty_table()
    return table.take(pa.array(np.arange(table.num_rows)))
