"""Generated, timestamp-sorted input streams for the source tests (deterministic per seed)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq


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
    os.makedirs(directory, exist_ok=True)
    bounds = np.linspace(0, table.num_rows, n_files + 1).astype(int)
    paths = []
    for i in range(n_files):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        path = os.path.join(directory, f"part-{i:05d}.{fmt}")
        if fmt == "parquet":
            pq.write_table(part, path, row_group_size=row_group_size)
        elif fmt == "csv":
            pa_csv.write_csv(part, path)
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(row) + "\n" for row in part.to_pylist())
        paths.append(path)
    return paths

