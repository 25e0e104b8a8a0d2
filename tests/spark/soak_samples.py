"""The soak's samples: read back, cut into driver lives, checked flat, summed up as figures.

Every micro-batch of a soak (:mod:`tests.spark.soak`) appends one JSON line (written by
:mod:`tests.spark.soak_driver`): the batch id, the wall clock, the files and bytes under the
state location and the resident memory of the JVM, of the driver's Python processes and of the
largest Python worker. A kill restarts every process, so memory is judged within one driver
life (between two kills); the state location outlives the kills and is judged over the run.

Flat means: the maximum over the last third is at most the maximum over the middle third plus a
stated tolerance (:data:`BOUNDS`). The first third is left out (the location fills up to its
retention limits and the JVM warms up there); maxima, not a fitted slope, so that one noisy
sample cannot tip the verdict either way. A least-squares slope is reported next to it
(:func:`figures`) but not asserted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LOCATION = ("location_files", "location_bytes")
MEMORY = ("jvm_rss_bytes", "driver_rss_bytes", "worker_rss_bytes")
MIB = 2**20


@dataclass(frozen=True)
class Bound:
    """How far the last third's maximum may rise above the middle third's: a fraction + a sum."""

    fraction: float
    absolute: float

    def limit(self, middle: float) -> float:
        return middle * (1 + self.fraction) + self.absolute


#: The tolerances. The location's size is a function of the input (the soak's data and kill
#: points are fixed), up to the digits of the timings and RSS figures in its metrics files and
#: the join state of the batches whose window holds more rows: 2 files and 5 % of its bytes. A
#: leak of a file every 20 batches fails over a run of 250, one of 100 bytes a batch over a run
#: of 2,000. Memory is not a function of the input (when G1 grows the JVM's heap, which Python
#: worker serves a task, when Spark starts or reaps a pooled planner process, ~160 MiB each, are
#: the machine's), so its bounds are absolute and generous: the largest rise seen between a
#: life's middle and last thirds over the long soak's lives was 141 MiB for the JVM (whose heap
#: G1 grows when it likes) and 1 MiB for the others; the bounds are 384 MiB for the JVM,
#: 256 MiB for the driver's Python processes (a ~160 MiB planner process started again) and
#: 64 MiB for the largest worker. Over a life of 100 batches that catches a leak of 12 MiB a
#: batch in the JVM and 2 MiB a batch in a worker; slower leaks show in the long soak's slopes
#: (docs/soak.md), not here.
BOUNDS = {
    "location_files": Bound(0.0, 2),
    "location_bytes": Bound(0.05, 0),
    "jvm_rss_bytes": Bound(0.0, 384 * MIB),
    "driver_rss_bytes": Bound(0.0, 256 * MIB),
    "worker_rss_bytes": Bound(0.0, 64 * MIB),
}


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The last sample of every batch id (a replayed batch is sampled again), torn lines out."""
    last: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the line a kill cut short
        last[int(record["batch_id"])] = record
    return [last[k] for k in sorted(last)]


def kill_times(work: Path) -> list[float]:
    """When each kill happened: the crash point creates its once-file just before SIGKILL."""
    return sorted(p.stat().st_mtime for p in work.glob("killed-*"))


def lives(samples: list[dict[str, Any]], kills: list[float]) -> list[list[dict[str, Any]]]:
    """The samples of each driver process, split at the kill times (samples carry wall time)."""
    edges = [float("-inf"), *kills, float("inf")]
    return [[s for s in samples if lo < s["wall"] <= hi] for lo, hi in zip(edges, edges[1:],
                                                                            strict=False)]


def thirds(values: list[float]) -> tuple[float, float]:
    """``(max over the middle third, max over the last third)`` of ``values``."""
    n = len(values)
    return max(values[n // 3: 2 * n // 3]), max(values[2 * n // 3:])


def location_violations(samples: list[dict[str, Any]]) -> list[str]:
    """The location's series that rise beyond their :data:`BOUNDS` over the run; empty: flat."""
    return [v for v in (_verdict(k, [s[k] for s in samples], "the run") for k in LOCATION) if v]


def memory_violations(samples: list[dict[str, Any]], kills: list[float],
                      min_life: int = 30) -> list[str]:
    """The memory series that rise beyond their :data:`BOUNDS` within a driver life.

    Every life of at least ``min_life`` batches is judged; ValueError when none is that long.
    """
    judged = [life for life in lives(samples, kills) if len(life) >= min_life]
    if not judged:
        raise ValueError(f"no driver life of {min_life} batches or more to judge memory on")
    out = []
    for life in judged:
        span = f"batches {life[0]['batch_id']}-{life[-1]['batch_id']}"
        out += [_verdict(key, [s[key] for s in life], span) for key in MEMORY]
    return [v for v in out if v]


def _verdict(key: str, values: list[float], span: str) -> str:
    middle, last = thirds(values)
    limit = BOUNDS[key].limit(middle)
    return "" if last <= limit else (f"{key} over {span}: last third's maximum {last:,.0f} > "
                                     f"{limit:,.0f} (middle third's {middle:,.0f} + tolerance)")


def slope(samples: list[dict[str, Any]], key: str) -> float:
    """Least-squares slope of ``key`` per batch over the second half of ``samples``."""
    half = samples[len(samples) // 2:]
    x = np.array([s["batch_id"] for s in half], float)
    y = np.array([s[key] for s in half], float)
    return float(np.polyfit(x, y, 1)[0]) if len(half) >= 2 else 0.0


def figures(samples: list[dict[str, Any]], kills: list[float]) -> dict[str, Any]:
    """The soak's figures: size, kills, start and end, thirds, slopes, violations."""
    every = lives(samples, kills)
    longest = max(every, key=len)
    return {
        "batches": len(samples), "kills": len(kills),
        "sampled_seconds": round(samples[-1]["wall"] - samples[0]["wall"], 1),
        "start": {k: samples[0][k] for k in (*LOCATION, *MEMORY)},
        "end": {k: samples[-1][k] for k in (*LOCATION, *MEMORY)},
        "location_thirds_max": {k: thirds([s[k] for s in samples]) for k in LOCATION},
        "location_slope_per_batch_2nd_half": {k: round(slope(samples, k), 3) for k in LOCATION},
        "memory_slope_per_batch_median_life": {
            k: round(float(np.median([slope(life, k) for life in every if len(life) >= 20]
                                     or [0.0]))) for k in MEMORY},
        "memory_peak_per_life_mib": {k: [round(max(s[k] for s in life) / MIB)
                                         for life in every if life] for k in MEMORY},
        "longest_life": {"batches": len(longest), **{
            k: [round(v / MIB) for v in thirds([s[k] for s in longest])] for k in MEMORY}},
        "violations": location_violations(samples) + memory_violations(
            samples, kills, min_life=min(30, len(longest))),
    }
