"""Run metrics of the executor: queues, memory, latency, throughput and time per operator.

Jiang & Chakravarthy (2003), §5.2 compares strategies by tuple latency over time (Figure 2), output
rate over time (Figure 3) and total queue memory over time (Figure 4). :class:`PlanMetrics` records
the raw events of one plan run so that all three, and per-operator costs, can be derived:

* ``arrival``  -- an input packet entered the plan (stream, rows, Arrow bytes);
* ``operator`` -- an operator processed a packet (rows in/out, bytes in/out, seconds);
* ``queues``   -- a sample of every queue's rows and Arrow bytes (taken at each decision);
* ``output``   -- a packet left the plan at a root (rows, latency = output time - arrival).

It is exposed three ways: the Python object (:meth:`PlanMetrics.summary`,
:meth:`PlanMetrics.timeline`, :meth:`PlanMetrics.operator_queues`), JSON lines
(:class:`JsonLinesWriter`; the last line is the summary, and its counts equal the sums over the
event lines), and :meth:`PlanMetrics.progress`, a flat ``dict[str, float | int | str]`` a
Spark source can put into its progress or logs.
Times are seconds on the engine clock (0 = start of the run). Thread-safe (one lock).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

Event = dict[str, Any]


class PlanMetrics:
    """Collects the events of one run of a plan.

    Parameters
    ----------
    operators
        Operator ids of the plan (fixes the order of per-operator results).
    labels
        Free labels copied into the summary (e.g. ``strategy``, ``workers``).
    """

    def __init__(self, operators: Sequence[str], **labels: str | int) -> None:
        self.operators = tuple(operators)
        self.labels: dict[str, str | int] = dict(labels)
        self._lock = threading.Lock()
        self._arrivals: list[tuple[float, str, int, int]] = []
        self._ops: list[tuple[float, str, int, int, int, int, float]] = []
        self._samples: list[tuple[float, int, int, dict[str, tuple[int, int]]]] = []
        self._outputs: list[tuple[float, str, int, float]] = []
        self.end_time: float | None = None

    # ---------------------------------------------------------------- recording
    def arrival(self, t: float, stream: str, rows: int, nbytes: int) -> None:
        """Record an input packet entering the plan."""
        with self._lock:
            self._arrivals.append((t, stream, rows, nbytes))

    def processed(self, t: float, op: str, rows_in: int, rows_out: int, bytes_in: int,
                  bytes_out: int, seconds: float) -> None:
        """Record one packet processed by operator ``op``."""
        with self._lock:
            self._ops.append((t, op, rows_in, rows_out, bytes_in, bytes_out, seconds))

    def queues(self, t: float, sizes: Mapping[str, tuple[int, int]]) -> None:
        """Record ``{queue: (rows, bytes)}`` at time ``t``."""
        rows = sum(r for r, _ in sizes.values())
        nbytes = sum(b for _, b in sizes.values())
        with self._lock:
            self._samples.append((t, rows, nbytes, dict(sizes)))

    def output(self, t: float, root: str, rows: int, arrival: float) -> None:
        """Record ``rows`` output by ``root`` at ``t`` from input that arrived at ``arrival``."""
        with self._lock:
            self._outputs.append((t, root, rows, t - arrival))

    def finish(self, t: float) -> None:
        """Mark the end of the run."""
        self.end_time = t

    # ---------------------------------------------------------------- derived values
    def _latencies(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.array([o[2] for o in self._outputs], dtype=np.float64)
        lat = np.array([o[3] for o in self._outputs], dtype=np.float64)
        return lat, rows

    def latency_stats(self) -> dict[str, float | None]:
        """Tuple-weighted mean, p50, p99 and max latency (seconds) of all output tuples."""
        with self._lock:
            lat, rows = self._latencies()
        keep = rows > 0
        lat, rows = lat[keep], rows[keep]
        if not len(lat):
            return {"mean": None, "p50": None, "p99": None, "max": None}
        return {"mean": float(np.average(lat, weights=rows)),
                "p50": weighted_quantile(lat, rows, 0.5),
                "p99": weighted_quantile(lat, rows, 0.99), "max": float(lat.max())}

    def operator_totals(self) -> dict[str, dict[str, float]]:
        """Per operator: packets, rows and bytes in/out, busy seconds, cost and selectivity."""
        totals = {op: dict.fromkeys(("packets", "rows_in", "rows_out", "bytes_in", "bytes_out",
                                     "seconds"), 0.0) for op in self.operators}
        with self._lock:
            events = list(self._ops)
        for _, op, r_in, r_out, b_in, b_out, sec in events:
            t = totals.setdefault(op, dict.fromkeys(totals[self.operators[0]], 0.0))
            for key, value in (("packets", 1), ("rows_in", r_in), ("rows_out", r_out),
                               ("bytes_in", b_in), ("bytes_out", b_out), ("seconds", sec)):
                t[key] += value
        for t in totals.values():
            t["cost_per_tuple"] = t["seconds"] / t["rows_in"] if t["rows_in"] else 0.0
            t["selectivity"] = t["rows_out"] / t["rows_in"] if t["rows_in"] else 0.0
        return totals

    def summary(self) -> dict[str, Any]:
        """Totals of the run (JSON-ready)."""
        with self._lock:
            input_rows = sum(a[2] for a in self._arrivals)
            output_rows = sum(o[2] for o in self._outputs)
            mem = np.array([s[2] for s in self._samples], dtype=np.float64)
            first = min((a[0] for a in self._arrivals), default=0.0)
            last = max((o[0] for o in self._outputs), default=first)
        elapsed = self.end_time if self.end_time is not None else last
        span = max(last - first, 0.0)
        return {**self.labels, "elapsed": elapsed, "input_rows": input_rows,
                "output_rows": output_rows, "input_packets": len(self._arrivals),
                "output_packets": len(self._outputs),
                "throughput": output_rows / span if span > 0 else 0.0,
                "latency": self.latency_stats(),
                "peak_queue_bytes": int(mem.max()) if len(mem) else 0,
                "mean_queue_bytes": float(mem.mean()) if len(mem) else 0.0,
                "operators": self.operator_totals()}

    def progress(self) -> dict[str, float | int | str]:
        """Flat summary (``latency_p99``, ``op.<id>.seconds``, ...) for Spark progress/logs."""
        s = self.summary()
        flat: dict[str, float | int | str] = {k: v for k, v in s.items()
                                              if isinstance(v, int | float | str)}
        for key, value in s["latency"].items():
            flat[f"latency_{key}"] = -1.0 if value is None else value
        for op, totals in s["operators"].items():
            for key, value in totals.items():
                flat[f"op.{op}.{key}"] = value
        return flat

    def timeline(self, bucket: float) -> dict[str, np.ndarray]:
        """Per time bucket: mean latency, output rows/s, mean and peak queue bytes, input rows/s.

        Buckets with no output have latency NaN; without samples memory is NaN.
        """
        with self._lock:
            outs, samples, arr = list(self._outputs), list(self._samples), list(self._arrivals)
        end = max([0.0, *(o[0] for o in outs), *(s[0] for s in samples), *(a[0] for a in arr)])
        n = int(end // bucket) + 1
        out_t = np.array([o[0] for o in outs]), np.array([o[2] for o in outs], dtype=float)
        lat = np.array([o[3] for o in outs], dtype=float)
        idx = (out_t[0] // bucket).astype(np.int64) if len(outs) else np.zeros(0, np.int64)
        rows = np.bincount(idx, weights=out_t[1], minlength=n)
        lat_sum = np.bincount(idx, weights=out_t[1] * lat, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            latency = np.where(rows > 0, lat_sum / rows, np.nan)
        mem_mean, mem_peak = _bucket_memory(samples, bucket, n)
        a_idx = np.array([int(a[0] // bucket) for a in arr], dtype=np.int64)
        arrivals = np.bincount(a_idx, weights=[a[2] for a in arr], minlength=n) if arr else (
            np.zeros(n))
        return {"time": np.arange(n) * bucket, "latency": latency, "output_rate": rows / bucket,
                "memory_mean": mem_mean, "memory_peak": mem_peak, "input_rate": arrivals / bucket}

    def operator_queues(self, bucket: float) -> dict[str, dict[str, np.ndarray]]:
        """Per operator, the rows and Arrow bytes waiting in its input queues over time.

        Returns ``{op: {"rows": peak per bucket, "bytes": peak per bucket}}``; buckets without
        a sample are NaN. Queues are named ``source->target`` (the operator is the target).
        """
        with self._lock:
            samples = list(self._samples)
        n = int(max((s[0] for s in samples), default=0.0) // bucket) + 1
        idx = np.array([int(s[0] // bucket) for s in samples], dtype=np.int64)
        out: dict[str, dict[str, np.ndarray]] = {}
        for op in self.operators:
            rows = np.array([sum(v[0] for q, v in s[3].items() if q.endswith(f"->{op}"))
                             for s in samples], dtype=np.float64)
            nbytes = np.array([sum(v[1] for q, v in s[3].items() if q.endswith(f"->{op}"))
                               for s in samples], dtype=np.float64)
            out[op] = {"rows": _peak(idx, rows, n), "bytes": _peak(idx, nbytes, n)}
        return out

    def events(self) -> Iterator[Event]:
        """Every recorded event as a JSON-ready dict, in recording order per kind."""
        with self._lock:
            arr, ops, samples, outs = (list(self._arrivals), list(self._ops),
                                       list(self._samples), list(self._outputs))
        for t, stream, rows, nbytes in arr:
            yield {"event": "arrival", "t": t, "stream": stream, "rows": rows, "bytes": nbytes}
        for t, op, r_in, r_out, b_in, b_out, sec in ops:
            yield {"event": "operator", "t": t, "op": op, "rows_in": r_in, "rows_out": r_out,
                   "bytes_in": b_in, "bytes_out": b_out, "seconds": sec}
        for t, rows, nbytes, per in samples:
            yield {"event": "queues", "t": t, "rows": rows, "bytes": nbytes,
                   "per_queue": {q: list(v) for q, v in per.items()}}
        for t, root, rows, latency in outs:
            yield {"event": "output", "t": t, "root": root, "rows": rows, "latency": latency}


def _bucket_memory(samples: list[tuple[float, int, int, dict[str, tuple[int, int]]]],
                   bucket: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    if not samples:
        return np.full(n, np.nan), np.full(n, np.nan)
    idx = np.array([int(s[0] // bucket) for s in samples], dtype=np.int64)
    mem = np.array([s[2] for s in samples], dtype=np.float64)
    count = np.bincount(idx, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, np.bincount(idx, weights=mem, minlength=n) / count, np.nan)
    return mean, _peak(idx, mem, n)


def _peak(idx: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    peak = np.full(n, np.nan)
    if len(values):
        np.fmax.at(peak, idx, values)
    return peak


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` of the total."""
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    pos = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(values[order][min(pos, len(values) - 1)])


class JsonLinesWriter:
    """Write metrics as JSON lines: every event, then one ``summary`` line.

    Parameters
    ----------
    target
        A path or an open text file.
    """

    def __init__(self, target: str | Path | IO[str]) -> None:
        self.target = target

    def write(self, metrics: PlanMetrics) -> int:
        """Write all lines; return how many were written."""
        if isinstance(self.target, str | Path):
            with open(self.target, "w", encoding="utf-8") as handle:
                return self._write(handle, metrics)
        return self._write(self.target, metrics)

    @staticmethod
    def _write(handle: IO[str], metrics: PlanMetrics) -> int:
        n = 0
        for event in metrics.events():
            handle.write(json.dumps(event, sort_keys=True) + "\n")
            n += 1
        handle.write(json.dumps({"event": "summary", **metrics.summary()}, sort_keys=True) + "\n")
        return n + 1


def read_json_lines(path: str | Path) -> list[Event]:
    """Read a JSON lines metrics file back into a list of dicts."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
