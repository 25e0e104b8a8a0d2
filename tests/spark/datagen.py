"""Generated, timestamp-sorted input streams for the source tests (deterministic per seed)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.inputs import write_input


def make_stream(seed: int, input_id: int, n_rows: int, n_keys: int = 5,
                ts_step_ms: int = 700, ts_type: str = "int64") -> pa.Table:
    """One input: non-decreasing ts with many ties (also across inputs), keys, nullable values."""
    rng = np.random.default_rng([seed, input_id])
    ts = np.cumsum(rng.integers(0, ts_step_ms, n_rows)).astype(np.int64) + 1_700_000_000_000
    ts = (ts // 100) * 100  # coarse, so equal timestamps across inputs are common
    keys = np.array([f"k{k}" for k in range(n_keys)])[rng.integers(0, n_keys, n_rows)]
    value = rng.normal(10.0, 5.0, n_rows).round(3)
    value_mask = rng.random(n_rows) < 0.1
    ts_arr = pa.array(ts)
    if ts_type == "timestamp":
        ts_arr = pa.array(ts * 1000, pa.timestamp("us", tz="UTC"))
    return pa.table({
        "ts": ts_arr,
        "meter": pa.array(keys),
        "value": pa.array(value, mask=value_mask),
        "kind": pa.array(np.where(rng.random(n_rows) < 0.3, "alarm", "ok")),
    })


def write_stream(table: pa.Table, directory: str, n_files: int, fmt: str = "parquet",
                 row_group_size: int = 50) -> list[str]:
    """Split ``table`` into ``n_files`` files named in stream order under ``directory``."""
    return [str(p) for p in write_input(table, directory, fmt, n_files, row_group_size)]

