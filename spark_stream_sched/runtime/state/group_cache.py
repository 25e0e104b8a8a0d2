"""In-memory cache of committed group state in an executor's Python worker, within a budget.

Spark's state-store providers keep the latest committed versions of a state partition in the
executor's memory (``HDFSBackedStateStoreProvider``'s ``loadedMaps``, at most
``spark.sql.streaming.maxBatchesToRetainInMemory`` versions; RocksDB's open instance), so the
next micro-batch of the same partition on the same executor does not read the checkpoint. Spark
reuses Python workers between tasks (``spark.python.worker.reuse``, default true), so a
module-level cache in the worker plays that role for the ``ordered-agg`` source:

* key ``(stateLocation, group)``, holding the **one** newest version the worker committed or
  loaded for that group, its content digest (the manifest's SHA-256) and its snapshot bytes;
* :meth:`GroupCache.get` answers only for the exact version asked for *and* the digest the
  version's manifest names, so a task that lands elsewhere, a worker that restarted, a batch
  replayed from an older version, or a state directory replaced under the same path all fall
  back to the checkpointed file -- the cache can make a batch faster, never different;
* bytes, not live objects: decoding cached bytes is exactly decoding the file, so every figure
  a batch computes (and so every adaptation decision) is the same with or without a hit;
* least recently used entries are dropped beyond ``budget`` bytes (option
  ``stateMemoryBudget``, else :data:`DEFAULT_BUDGET`).

Thread-safe (a lock around the dictionary); pure Python.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

#: Bytes cached per Python worker when option ``stateMemoryBudget`` is not set.
DEFAULT_BUDGET = 256 << 20


@dataclass(frozen=True)
class Cached:
    """One group's committed state bytes at ``version``, and its file's ``(size, mtime_ns)``."""

    version: str
    digest: str
    data: bytes
    stamp: tuple[int, int] | None = None


class GroupCache:
    """LRU cache ``(location, group) -> Cached`` under a byte budget (module docstring)."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = budget
        self._entries: OrderedDict[tuple[str, int], Cached] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        """Bytes held."""
        return self._bytes

    def get(self, location: str, group: int, version: str, digest: str,
            stamp: tuple[int, int] | None = None) -> bytes | None:
        """The bytes of ``group`` at ``version`` if cached with this ``digest``, else None.

        With ``stamp`` (the file's ``(size, mtime_ns)`` now), an entry whose file changed since
        it was cached is a miss: the caller reads the file, so a damaged or replaced file is
        detected (its digest check fails) instead of being hidden by the cache.
        """
        with self._lock:
            found = self._entries.get((location, group))
            if found is None or found.version != version or found.digest != digest or (
                    stamp is not None and found.stamp != stamp):
                self.misses += 1
                return None
            self._entries.move_to_end((location, group))
            self.hits += 1
            return found.data

    def put(self, location: str, group: int, version: str, digest: str, data: bytes,
            stamp: tuple[int, int] | None = None) -> None:
        """Remember ``group``'s state at ``version`` (replacing its older version)."""
        with self._lock:
            self._drop((location, group))
            if len(data) > self.budget:
                return
            self._entries[(location, group)] = Cached(version, digest, data, stamp)
            self._bytes += len(data)
            while self._bytes > self.budget:
                self._drop(next(iter(self._entries)))

    def resize(self, budget: int) -> None:
        """Set the budget (the query's ``stateMemoryBudget``) and evict down to it."""
        with self._lock:
            self.budget = budget
            while self._bytes > self.budget and self._entries:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        """Forget everything (tests; a query that stops keeps its entries otherwise)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: tuple[str, int]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old.data)


#: The worker's cache, shared by every task the Python worker runs.
CACHE = GroupCache()
