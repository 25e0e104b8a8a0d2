"""The measured cases of ``bench keyed`` (workloads in :mod:`.keyed_workloads`).

* ``wait`` -- hybrid vs partitioned queue, one keyed operator whose per-tuple cost is a
  **simulated I/O wait** (``time.sleep``), ``W = 1, 2, 4``, uniform keys and Gaussian keys of
  decreasing sigma under the ``adjacent`` and ``colliding`` placements; queues alternate within
  each repeat, medians of ``repeat`` runs and the ratio of the medians;
* ``latency`` -- the same operator fed at a paced rate (a fixed multiple of what one worker can
  wait through), per-packet latency from push to release: median and p95, with throughput;
* ``cpu`` -- CPU-bound per-tuple costs (``cheap``, ``numpy``, ``python``), hash partitioning;
  on a machine with about one usable core and one GIL these cannot scale, and the table says so;
* ``pipeline`` -- the clickstream chain views -> pairs -> sessionize per heuristic.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.bench.common import progress
from spark_stream_sched.bench.keyed_workloads import (
    PLACEMENTS,
    SessionPairs,
    busiest_share,
    clickstream,
    costed,
    factory,
    hottest_partition,
    kernel_gil_free_seconds,
    keyed_table,
    packets,
    partition_of,
    placement_map,
)
from spark_stream_sched.runtime.executor.keyed_parallel import (
    HEURISTICS,
    QUEUES,
    Keyed,
    KeyedPipeline,
    PipelineResult,
    Stateless,
)
from spark_stream_sched.runtime.keyed.base import build_operator
from spark_stream_sched.runtime.keyed.stage import StageSpec, parse_stage
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash

Results = list[dict[str, Any]]
SIGMAS = (1.0, 0.3, 0.1, 0.03)


@dataclass(frozen=True)
class Sizes:
    """What one ``bench keyed`` run measures (``quick``: a smoke-sized subset)."""

    rows: int = 100_000
    repeat: int = 3
    seed: int = 0
    quick: bool = False
    wait_us: float = 100.0
    wait_rows: int = 16_384
    packet_rows: int = 2_048
    latency_packets: int = 30
    latency_rows: int = 512
    load: float = 1.5

    @property
    def workers(self) -> tuple[int, ...]:
        """Worker counts measured."""
        return (1, 2) if self.quick else (1, 2, 4)

    @property
    def sigmas(self) -> tuple[float, ...]:
        """Gaussian sigmas measured (besides uniform keys)."""
        return (1.0, 0.03) if self.quick else SIGMAS


def _load() -> float:
    return os.getloadavg()[0]


def _wait_dists(sizes: Sizes) -> list[tuple[float | None, str]]:
    """(sigma or None for uniform, placement); uniform keys need one placement only."""
    return [(None, "adjacent")] + [(s, p) for s in sizes.sigmas for p in PLACEMENTS]


def run_wait(sizes: Sizes, shown: bool) -> Results:
    """Hybrid vs partitioned under the simulated I/O wait, alternating queues per repeat."""
    op = costed("wait", sizes.wait_us)
    cases = [(s, p, w) for s, p in _wait_dists(sizes) for w in sizes.workers]
    results: Results = []
    with progress(len(cases), "bench keyed (wait)", shown) as bar:
        for sigma, placement, workers in cases:
            table = keyed_table(sizes.wait_rows, sigma, sizes.seed)
            data = packets(table, sizes.packet_rows)
            queues = QUEUES if workers > 1 else QUEUES[:1]  # W = 1: the queues coincide
            pipes = {q: KeyedPipeline([Keyed("wait", factory(op, table.schema), ("k",),
                                             partition_of=partition_of(placement))],
                                      workers=workers, queue=q) for q in queues}
            runs: dict[str, list[PipelineResult]] = {q: [] for q in queues}
            for _ in range(sizes.repeat):
                for q in queues:
                    runs[q].append(pipes[q].run(data))
            parts = placement_map(placement)[table.column("k").to_numpy()]
            for q in queues:
                wall = statistics.median(r.seconds for r in runs[q])
                results.append({
                    "part": "wait", "keys": _dist(sigma), "placement": placement,
                    "queue": q, "workers": workers, "rows": table.num_rows,
                    "wait_us": sizes.wait_us, "tuples_per_s": table.num_rows / wall,
                    "ideal_tuples_per_s": 1e6 / sizes.wait_us,
                    "bound_speedup": (min(workers, 1 / hottest_partition(parts)) if q == "hybrid"
                                      else 1 / busiest_share(parts, workers)),
                    "cpu_per_wall": statistics.median(r.cpu_seconds / r.seconds for r in runs[q]),
                    "loadavg": _load()})
            bar.update()
    _ratios(results, ("keys", "placement", "workers"))
    for r in results:
        ref = next(o for o in results if o["keys"] == r["keys"]
                   and o["placement"] == r["placement"] and o["workers"] == 1)
        r["speedup"] = r["tuples_per_s"] / ref["tuples_per_s"]
    return results


def _dist(sigma: float | None) -> str:
    return "uniform" if sigma is None else f"sigma={sigma:g}"


def _ratios(results: Results, same: tuple[str, ...]) -> None:
    """``hybrid_vs_partitioned`` on hybrid rows: ratio of median throughputs."""
    for r in results:
        other = [o for o in results if o["queue"] == "partitioned"
                 and all(o[k] == r[k] for k in same)]
        r["hybrid_vs_partitioned"] = (r["tuples_per_s"] / other[0]["tuples_per_s"]
                                      if r["queue"] == "hybrid" and other else None)


def paced(data: list[tuple[pa.Table, int | None]], interval: float
          ) -> Iterator[tuple[pa.Table, int | None]]:
    """Yield packet ``i`` at ``start + i * interval`` (never early; late if the feeder lags)."""
    start = time.perf_counter()
    for i, packet in enumerate(data):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield packet


def run_latency(sizes: Sizes, shown: bool) -> Results:
    """Throughput and packet latency vs ``W`` at a paced offered load (simulated I/O wait)."""
    op = costed("wait", sizes.wait_us)
    rows = sizes.latency_rows * sizes.latency_packets
    interval = sizes.latency_rows * sizes.wait_us * 1e-6 / sizes.load
    dists = [(None, "adjacent"), (0.1, "colliding")]
    cases = [(s, p, q, w) for s, p in dists for q in QUEUES for w in sizes.workers]
    results: Results = []
    with progress(len(cases), "bench keyed (latency)", shown) as bar:
        for sigma, placement, queue, workers in cases:
            table = keyed_table(rows, sigma, sizes.seed)
            data = packets(table, sizes.latency_rows)
            pipe = KeyedPipeline([Keyed("wait", factory(op, table.schema), ("k",),
                                        partition_of=partition_of(placement))],
                                 workers=workers, queue=queue)
            runs = [pipe.run(paced(data, interval)) for _ in range(sizes.repeat)]
            results.append({
                "part": "latency", "keys": _dist(sigma), "placement": placement,
                "queue": queue, "workers": workers, "rows": rows, "wait_us": sizes.wait_us,
                "offered_tuples_per_s": sizes.latency_rows / interval,
                "tuples_per_s": rows / statistics.median(r.seconds for r in runs),
                "latency_median_ms": 1e3 * statistics.median(
                    float(np.median(r.latencies)) for r in runs),
                "latency_p95_ms": 1e3 * statistics.median(
                    float(np.percentile(r.latencies, 95)) for r in runs),
                "loadavg": _load()})
            bar.update()
    return results


def run_cpu(sizes: Sizes, shown: bool) -> Results:
    """CPU-bound per-tuple costs under hash partitioning: every sigma, cost, queue and ``W``."""
    costs = ("cheap", "python") if sizes.quick else ("cheap", "numpy", "python")
    cases = [(s, c, q, w) for s in sizes.sigmas for c in costs for q in QUEUES
             for w in sizes.workers]
    gil_free = kernel_gil_free_seconds()
    base: dict[tuple[float, str, str], float] = {}
    results: Results = []
    with progress(len(cases), "bench keyed (cpu)", shown) as bar:
        for sigma, cost, queue, workers in cases:
            n = sizes.rows if cost == "cheap" else max(2048, sizes.rows // 25)
            table = keyed_table(n, sigma, sizes.seed)
            pipe = KeyedPipeline([Keyed("count", factory(costed(cost), table.schema), ("k",))],
                                 workers=workers, queue=queue)
            runs = [pipe.run(packets(table, 2048)) for _ in range(sizes.repeat)]
            rate = n / statistics.median(r.seconds for r in runs)
            base.setdefault((sigma, cost, queue), rate)
            parts = assign_to_partition_group(key_hash(table, ["k"]), 100).astype(np.int64)
            results.append({
                "part": "cpu", "keys": _dist(sigma), "cost": cost, "queue": queue,
                "workers": workers, "rows": n, "tuples_per_s": rate,
                "speedup": rate / base[(sigma, cost, queue)],
                "cpu_per_wall": statistics.median(r.cpu_seconds / r.seconds for r in runs),
                "busiest_share": busiest_share(parts, workers),
                "gil_free_fraction": (gil_free * base[(sigma, cost, queue)]
                                      if cost == "numpy" else None),
                "loadavg": _load()})
            bar.update()
    _ratios(results, ("keys", "cost", "workers"))
    return results


def clickstream_stages(schema: pa.Schema) -> list[Stateless | Keyed]:
    """WC -> SL (views) -> PS (pairs) -> PS (``sessionize`` sums per session)."""
    pairs_schema = SessionPairs(StageSpec(SessionPairs.name), schema, ["user"], "ts").output_schema
    stage = parse_stage("sessionize(30 minutes)")
    aggs = ("count(*) as clicks", "sum(new_pairs) as pairs")
    return [Stateless("views", lambda t: t.filter(t.column("view"))),
            Keyed("pairs", lambda p: SessionPairs(StageSpec(SessionPairs.name), schema,
                                                  ["user"], "ts"), ("user",)),
            Keyed("sessions", lambda p: build_operator(stage, pairs_schema, ["user"], "ts",
                                                       aggs), ("user",))]


def run_pipeline(sizes: Sizes, shown: bool) -> Results:
    """Clickstream: every heuristic, W in 1..2, both queues; outputs must be identical."""
    rows = sizes.rows // 2
    table = clickstream(rows, sizes.seed)
    data = packets(table, 2048)
    heuristics = ("lp", "qst") if sizes.quick else HEURISTICS
    cases = [(q, h, w) for q in QUEUES for h in heuristics for w in (1, 2)]
    results: Results = []
    reference: pa.Table | None = None
    with progress(len(cases), "bench keyed (pipeline)", shown) as bar:
        for queue, heuristic, workers in cases:
            pipe = KeyedPipeline(clickstream_stages(table.schema), workers=workers, queue=queue,
                                 heuristic=heuristic)
            runs = [pipe.run(data) for _ in range(sizes.repeat)]
            out = runs[0].table()
            reference = out if reference is None else reference
            results.append({
                "part": "pipeline", "queue": queue, "heuristic": heuristic,
                "workers": workers, "rows": rows,
                "tuples_per_s": rows / statistics.median(r.seconds for r in runs),
                "cpu_per_wall": statistics.median(r.cpu_seconds / r.seconds for r in runs),
                "sessions": 0 if out is None else out.num_rows,
                "pairs": 0 if out is None else int(pc.sum(out.column("pairs")).as_py() or 0),
                "identical": out is not None and reference is not None and out.equals(reference),
                "loadavg": _load()})
            bar.update()
    for r in results:
        ref = next(o for o in results if o["queue"] == r["queue"] and o["heuristic"] == "lp"
                   and o["workers"] == 1)
        r["vs_lp_w1"] = r["tuples_per_s"] / ref["tuples_per_s"]
    return results
