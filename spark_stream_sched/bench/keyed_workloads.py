"""Workloads of ``bench keyed``: bench-only operators, key distributions, key placements.

Operators (bench only, never registered):

* :class:`CostedCount` -- running count per key plus a **CPU** cost per tuple: ``cheap``
  (vectorised NumPy per sub-packet), ``numpy`` (a NumPy kernel over 4,096 floats per tuple,
  which drops the GIL inside the ufunc loop) or ``python`` (a pure-Python loop, holds the GIL);
* :class:`WaitCount` -- running count per key plus a **simulated I/O wait**: it sleeps
  ``wait_us`` microseconds per tuple (one ``time.sleep`` per sub-packet), standing for an
  I/O-bound lookup such as a call to an external service. Waiting needs no CPU, so it shows the
  queue disciplines' effect on a machine with about one usable core; it is labelled "I/O wait
  (simulated, time.sleep)" wherever it is reported;
* :class:`SessionPairs` -- the clickstream ``pairs`` operator (pure Python per click).

Keys (§7.2.1): ``N(0, sigma)`` clipped to ``[-1, 1]`` scaled onto keys 0..99 (smaller sigma =
more skew, hot keys around 49-50), or uniform on 0..99. Placements of keys onto the 100
partitions (``Keyed.partition_of``):

* ``adjacent`` -- range partitioning as in §7.2.1: key ``k`` -> partition ``k``. Under the
  partitioned queue's static ``p % W`` the hot partitions 48, 49, 50, 51 *alternate* between
  workers, so the skew is spread by accident;
* ``colliding`` -- keys ranked by distance from the Gaussian's mean go to partitions 0, 4, 8,
  ..., 96, then 1, 5, ..., then 2, ..., 3, ...: the 25 hottest keys all sit on partitions
  ``p % 4 == 0``, i.e. on worker 0 for both ``W = 2`` and ``W = 4``. An adversarial but possible
  placement (e.g. hot keys hashing alike), the case the hybrid queue is designed for.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.keyed.base import KeyedOperator
from spark_stream_sched.runtime.keyed.stage import StageSpec

KEYS = 100
KERNEL_SIZE = 4096
PLACEMENTS = ("adjacent", "colliding")
GAP_MS = 30 * 60 * 1000


class CostedCount(KeyedOperator):
    """Row operator: running count per key plus a per-tuple cost (bench only).

    The per-tuple loop of ``numpy``/``python`` *is* the measured workload (a per-tuple cost like
    §7's parametric operators), not an accident of the hot path.
    """

    name = "bench_costed_count"
    cost: ClassVar[str] = "cheap"
    wait_s: ClassVar[float] = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counts = np.zeros(KEYS, np.int64)
        self.buf = np.linspace(0.0, 1.0, KERNEL_SIZE)

    @property
    def output_schema(self) -> pa.Schema:
        """Input columns plus the added count column."""
        return self.input_schema.append(pa.field("n", pa.int64()))

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """One output row per input tuple, in input order."""
        keys = rows.column("k").to_numpy()
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        first = np.searchsorted(sorted_keys, sorted_keys, side="left")
        n = np.empty(len(keys), np.int64)
        n[order] = self.counts[sorted_keys] + np.arange(len(keys)) - first + 1
        np.add.at(self.counts, keys, 1)
        self.spend(len(keys))
        return rows.append_column("n", pa.array(n, pa.int64()))

    def spend(self, tuples: int) -> None:
        """The per-tuple cost of ``tuples`` tuples."""
        if self.cost == "numpy":
            for _ in range(tuples):
                np.sin(self.buf, out=self.buf)
        elif self.cost == "python":
            for i in range(tuples):
                sum(j * i for j in range(150))

    def snapshot(self) -> bytes:
        """Refused: a bench operator is never checkpointed (StateError)."""
        raise StateError(f"{self.name} is a bench operator: its state is not checkpointed")

    @classmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        """Refused: a bench operator is never checkpointed (StateError)."""
        raise StateError(f"{cls.name} is a bench operator: its state is not checkpointed")


class WaitCount(CostedCount):
    """:class:`CostedCount` whose per-tuple cost is a simulated I/O wait (``time.sleep``)."""

    name = "bench_wait_count"
    cost = "wait"

    def spend(self, tuples: int) -> None:
        """Sleep ``wait_s`` per tuple, once per sub-packet (the GIL is released)."""
        if tuples:
            time.sleep(tuples * self.wait_s)


def costed(cost: str, wait_us: float = 0.0) -> type[CostedCount]:
    """The operator class of ``cost`` (``cheap``, ``numpy``, ``python`` or ``wait``)."""
    base = WaitCount if cost == "wait" else CostedCount
    return type(f"{base.__name__}_{cost}", (base,), {"cost": cost, "wait_s": wait_us * 1e-6})


def factory(op: type[KeyedOperator], schema: pa.Schema) -> Callable[[int], KeyedOperator]:
    """``factory(p)`` building one operator of class ``op`` per partition."""
    return lambda p: op(StageSpec(op.name), schema, ["k"], "ts")


def keyed_table(rows: int, sigma: float | None, seed: int) -> pa.Table:
    """§7.2.1 keys ``N(0, sigma)`` clipped to ``[-1, 1]`` onto 0..99; ``None``: uniform keys."""
    rng = np.random.default_rng(seed)
    if sigma is None:
        keys = rng.integers(0, KEYS, rows).astype(np.int64)
    else:
        g = np.clip(rng.normal(0.0, sigma, rows), -1.0, 1.0)
        keys = np.rint((g + 1.0) / 2.0 * (KEYS - 1)).astype(np.int64)
    return pa.table({"ts": np.arange(rows, dtype=np.int64), "k": keys,
                     "__input": np.zeros(rows, np.int32),
                     "__seq": np.arange(rows, dtype=np.int64)})


def placement_map(placement: str) -> np.ndarray:
    """``map[k]`` = partition of key ``k`` (see the module docstring)."""
    if placement == "adjacent":
        return np.arange(KEYS, dtype=np.int64)
    by_heat = np.argsort(np.abs(np.arange(KEYS) - (KEYS - 1) / 2.0), kind="stable")
    slots = np.concatenate([np.arange(r, KEYS, 4) for r in range(4)])
    out = np.empty(KEYS, np.int64)
    out[by_heat] = slots
    return out


def partition_of(placement: str) -> Callable[[pa.Table], np.ndarray]:
    """``Keyed.partition_of`` for ``placement``."""
    mapping = placement_map(placement)
    return lambda table: mapping[table.column("k").to_numpy()]


def packets(table: pa.Table, rows: int, ts: str = "ts") -> list[tuple[pa.Table, int | None]]:
    """Cut ``table`` into packets with exact ready bounds (next packet's first ``ts``)."""
    cuts = list(range(0, table.num_rows, rows))
    out: list[tuple[pa.Table, int | None]] = []
    for i, lo in enumerate(cuts):
        nxt = cuts[i + 1] if i + 1 < len(cuts) else None
        bound = None if nxt is None else int(table.column(ts)[nxt].as_py())
        out.append((table.slice(lo, rows), bound))
    return out


def busiest_share(parts: np.ndarray, workers: int) -> float:
    """Share of the tuples the busiest worker gets under the static ``p % W`` assignment."""
    load = np.bincount(parts % workers, minlength=workers)
    return float(load.max() / max(1, load.sum()))


def hottest_partition(parts: np.ndarray) -> float:
    """Share of the tuples in the hottest partition (bounds any queue's speedup: 1/share)."""
    return float(np.bincount(parts).max() / max(1, len(parts)))


def kernel_gil_free_seconds(calls: int = 2000) -> float:
    """Seconds per tuple inside the ufunc loop: kernel(4096) minus kernel(1) (call overhead)."""
    big, small = np.linspace(0, 1, KERNEL_SIZE), np.linspace(0, 1, 1)
    timings = []
    for buf in (big, small):
        start = time.perf_counter()
        for _ in range(calls):
            np.sin(buf, out=buf)
        timings.append((time.perf_counter() - start) / calls)
    return max(0.0, timings[0] - timings[1])


def machine_capacity(seconds_each: float = 0.2) -> float:
    """Cores really available: 2 threads of GIL-free sha256 vs 1 (2.0 = two full cores)."""
    data = b"x" * (1 << 20)
    start = time.perf_counter()
    rounds = 0
    while time.perf_counter() - start < seconds_each:
        hashlib.sha256(data).digest()
        rounds += 1
    one = (time.perf_counter() - start) / rounds

    def hash_rounds() -> None:
        for _ in range(rounds):
            hashlib.sha256(data).digest()

    threads = [threading.Thread(target=hash_rounds) for _ in range(2)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 2 * one * rounds / (time.perf_counter() - start)


class SessionPairs(KeyedOperator):
    """Row operator (bench only): per user, ``new_pairs`` = distinct earlier items of the session.

    A click opens a new session when ``ts > last_ts + 30 min`` (the ``sessionize`` rule). The
    per-tuple loop is the workload (set membership per click), pure Python: it holds the GIL.
    """

    name = "bench_session_pairs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open: dict[int, tuple[int, set[int]]] = {}

    @property
    def output_schema(self) -> pa.Schema:
        """Input columns plus the added count column."""
        return self.input_schema.append(pa.field("new_pairs", pa.int64()))

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """One output row per input tuple, in input order."""
        pairs = []
        for user, ts, item in zip(rows.column("user").to_pylist(), rows.column("ts").to_pylist(),
                                  rows.column("item").to_pylist(), strict=True):
            last, items = self.open.get(user, (ts, set()))
            if ts > last + GAP_MS:
                items = set()
            pairs.append(len(items) - (item in items))
            items.add(item)
            self.open[user] = (ts, items)
        return rows.append_column("new_pairs", pa.array(pairs, pa.int64()))

    def snapshot(self) -> bytes:
        """Refused: a bench operator is never checkpointed (StateError)."""
        raise StateError(f"{self.name} is a bench operator: its state is not checkpointed")

    @classmethod
    def restore(cls, data: bytes) -> KeyedOperator:
        """Refused: a bench operator is never checkpointed (StateError)."""
        raise StateError(f"{cls.name} is a bench operator: its state is not checkpointed")


def clickstream(rows: int, seed: int) -> pa.Table:
    """Zipf-skewed users, 500 items, strictly increasing ts (mean 2 s apart), 10% non-views."""
    rng = np.random.default_rng(seed)
    users = (rng.zipf(1.3, rows) % 2000).astype(np.int64)
    ts = np.cumsum(rng.integers(1, 4000, rows)).astype(np.int64)
    return pa.table({"ts": ts, "user": users, "item": rng.integers(0, 500, rows),
                     "view": rng.random(rows) > 0.1, "__input": np.zeros(rows, np.int32),
                     "__seq": np.arange(rows, dtype=np.int64)})
