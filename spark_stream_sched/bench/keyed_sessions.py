"""Benchmark of ``sessionize(gap)`` on a clickstream.

See Prasaad et al. (2018), Table 1, TPCx-BB Q2/Q4 sessions.

Three implementations compute the same sessions over the same generated clickstream, side by side
in one process:

* ``sessionize``: our operator, fed in packets with exact ready bounds (as S-Merge releases them);
* ``pandas``: the usual vectorised batch recipe (stable sort by user, a new session where the
  user changes or ``ts - previous > gap``, cumulative sum for the session id, grouped ``agg``);
  it is a batch computation that sees all rows at once, the speed ceiling for this shape;
* ``loop``: the per-tuple Python oracle (:mod:`spark_stream_sched.testing.session_reference`).

Each is timed ``repeat`` times (the computation only: turning the outputs into Python rows for
the equality check is not timed; the loop builds Python rows anyway); medians are reported with
the ratios ours/pandas and ours/loop, whether the outputs are equal (the loop bit-exactly; pandas
exactly except for the float sum, which pandas computes with Kahan summation, so it is compared
to 1e-12 relative) and the load average, since the machine may be shared.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from spark_stream_sched.bench.common import DEFAULT_BATCH_ROWS, rate
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.keyed import build_operator, parse_stage
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL
from spark_stream_sched.testing.session_reference import reference_sessions

T = TypeVar("T")
AGGREGATES = ("count(*) as clicks", "sum(dwell) as dwell", "min(item) as min_item",
              "max(item) as max_item", "first(item) as first_item", "last(item) as last_item")
OUTPUT = ["session_start", "session_end", "user", "clicks", "dwell", "min_item", "max_item",
          "first_item", "last_item"]


def clickstream(rows: int, keys: int, seed: int, gap_ms: int) -> pa.Table:
    """Clicks sorted by ts: Zipf-skewed users, about two gaps between an average user's clicks.

    Columns: ``ts`` (int64 ms), ``user`` (int64), ``item`` (int64), ``dwell`` (float64 seconds)
    and the identity columns ``__input`` (all 0) and ``__seq``.
    """
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, keys + 1) ** 0.8
    user = rng.choice(keys, size=rows, p=weights / weights.sum()).astype(np.int64)
    ts = np.cumsum(rng.exponential(2.0 * gap_ms / keys, rows)).astype(np.int64)
    return pa.table({
        "ts": ts, "user": user, "item": rng.integers(0, 20_000, rows),
        "dwell": rng.exponential(30.0, rows),
        INPUT_COL: pa.array(np.zeros(rows, np.int32)), SEQ_COL: np.arange(rows, dtype=np.int64)})


def run_ours(table: pa.Table, gap: str, packet_rows: int) -> pa.Table:
    """``sessionize`` fed packets of about ``packet_rows`` rows, each with its exact bound."""
    op = build_operator(parse_stage(f"sessionize({gap})"), table.schema, ["user"], "ts",
                        AGGREGATES)
    ts = table.column("ts").to_numpy()
    out, lo = [], 0
    while lo < table.num_rows:
        hi = min(lo + packet_rows, table.num_rows)
        hi = int(np.searchsorted(ts, ts[hi - 1], side="right"))  # never split equal ts
        bound = int(ts[hi]) if hi < table.num_rows else None
        out.append(op.update(table.slice(lo, hi - lo), bound))
        lo = hi
    out.append(op.finish())
    return pa.concat_tables(out)


def run_pandas(table: pa.Table, gap_ms: int) -> Any:
    """The vectorised batch recipe (stable sort by user, diff, cumsum, grouped agg)."""
    df = table.select(["ts", "user", "item", "dwell"]).to_pandas()
    df = df.sort_values("user", kind="stable")
    new = (df["user"] != df["user"].shift()) | (df["ts"] - df["ts"].shift() > gap_ms)
    sessions = df.groupby(new.cumsum().to_numpy(), sort=False).agg(
        session_start=("ts", "min"), last=("ts", "max"), user=("user", "first"),
        clicks=("ts", "size"), dwell=("dwell", "sum"), min_item=("item", "min"),
        max_item=("item", "max"), first_item=("item", "first"), last_item=("item", "last"))
    sessions["session_end"] = sessions["last"] + gap_ms
    return sessions.sort_values(["session_end", "session_start", "user"])[OUTPUT]


def pandas_records(frame: Any) -> list[dict[str, Any]]:
    """Rows of :func:`run_pandas`'s frame as plain Python values (outside the timing)."""
    records: list[dict[str, Any]] = frame.to_dict("records")
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in records]


def run_loop(table: pa.Table, gap_ms: int) -> list[dict[str, Any]]:
    """The per-tuple Python oracle."""
    return reference_sessions(table, ["user"], gap_ms, AGGREGATES)


def _timed(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    """Median wall time of ``repeat`` runs (at least one) and the last result."""
    times, result = [], None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result  # type: ignore[return-value]


def _same(ours: list[dict[str, Any]], other: list[dict[str, Any]], float_rel: float) -> bool:
    if len(ours) != len(other):
        return False
    for a, b in zip(ours, other, strict=True):
        if a.keys() != b.keys():
            return False
        for name, value in a.items():
            if isinstance(value, float) and float_rel:
                if not math.isclose(value, b[name], rel_tol=float_rel):
                    return False
            elif value != b[name] or (isinstance(value, float) and value.hex() != b[name].hex()):
                return False
    return True


def run_sessions_bench(rows: int, keys: int, repeat: int, seed: int, *,
                       gap: str = "30 minutes",
                       packet_rows: int = DEFAULT_BATCH_ROWS) -> list[dict[str, Any]]:
    """Time ``sessionize`` beside pandas and the per-tuple loop; one result dict per one.

    Returns
    -------
    list of dict
        Per implementation: ``impl``, ``rows``, ``keys``, ``sessions``, ``median_s``,
        ``tuples_per_s``, ``ours_vs_pandas`` and ``ours_vs_loop`` (throughput ratios, on the
        ``sessionize`` row), ``equal_to_ours``, ``repeat``, ``packet_rows``, ``loadavg``
        (``os.getloadavg()`` before and after).
    """
    gap_ms = parse_duration(gap, "session gap")
    table = clickstream(rows, keys, seed, gap_ms)
    load_before = os.getloadavg()
    t_ours, ours_table = _timed(repeat, lambda: run_ours(table, gap, packet_rows))
    t_pandas, frame = _timed(repeat, lambda: run_pandas(table, gap_ms))
    t_loop, loop_out = _timed(repeat, lambda: run_loop(table, gap_ms))
    ours, pandas_out = ours_table.to_pylist(), pandas_records(frame)
    load = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    common = {"rows": rows, "keys": keys, "sessions": len(ours), "repeat": repeat,
              "packet_rows": packet_rows, "gap": gap, "loadavg": load}
    results = [
        {"impl": "sessionize", "median_s": t_ours, "equal_to_ours": True,
         "ours_vs_pandas": t_pandas / t_ours, "ours_vs_loop": t_loop / t_ours},
        {"impl": "pandas", "median_s": t_pandas, "equal_to_ours": _same(ours, pandas_out, 1e-12)},
        {"impl": "loop", "median_s": t_loop, "equal_to_ours": _same(ours, loop_out, 0.0)},
    ]
    for result, seconds in zip(results, (t_ours, t_pandas, t_loop), strict=True):
        result.update(common, tuples_per_s=rate(rows, seconds))
    return results
