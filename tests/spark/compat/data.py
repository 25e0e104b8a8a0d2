"""The compatibility and deployment tests' data: three small inputs and the oracle's windows.

The same files feed every door (the source reads ``data/in<j>``; Spark's file streams read
``data/in<j>`` and then ``ends/in<j>``, whose one row declares the input finished), and every
door's windows must equal :func:`~spark_stream_sched.testing.reference.reference_aggregate`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from ..datagen import make_stream

N_INPUTS = 3
FILES = 5  # per input: the source's first run sees the first 3, its restart all of them
WINDOW, SLIDE = "10 seconds", "5 seconds"
AGGREGATES = ["count(*) as n", "avg(value) as mean", "first(value) as first_v",
              "last(kind) as last_kind", "max(ts) as last_ts"]


def write_data(root: Path, ts_type: str = "int64") -> list[pa.Table]:
    """``root/data/in<j>``: each input in :data:`FILES` Parquet files (``pos``: its position).

    ``root/ends/in<j>`` holds one file with the input's last row again and ``eof`` true (the
    end-of-input row that Spark's file streams need for the last windows to close). Files get
    increasing modification times: Spark's file source admits them in that order.
    """
    tables, stamp = [], time.time() - 10_000
    for j in range(N_INPUTS):
        table = make_stream(11, j, 240 + 31 * j, ts_type=ts_type)
        n = table.num_rows
        full = table.append_column("pos", pa.array(range(n), pa.int64())).append_column(
            "eof", pa.array([False] * n))
        cuts = [i * n // FILES for i in range(FILES + 1)]
        parts = [full.slice(a, b - a) for a, b in zip(cuts, cuts[1:], strict=False)]
        end = full.slice(n - 1, 1).set_column(full.schema.get_field_index("eof"), "eof",
                                              pa.array([True]))
        for i, (directory, part) in enumerate([*((root / "data" / f"in{j}", p) for p in parts),
                                               (root / "ends" / f"in{j}", end)]):
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"part-{i:05d}.parquet"
            pq.write_table(part, path)
            stamp += 1
            os.utime(path, (stamp, stamp))
        tables.append(table)
    return tables


def oracle(tables: list[pa.Table]) -> list[dict[str, Any]]:
    return reference_aggregate(tables, WindowSpec.parse(WINDOW, SLIDE), ["meter"], AGGREGATES)


def normalised(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in output order, window bounds as int64 ms (timestamps on a timestamp event time)."""
    def ms(value: Any) -> Any:
        return round(value.timestamp() * 1000) if hasattr(value, "timestamp") else value

    out = [{**r, "window_start": ms(r["window_start"]), "window_end": ms(r["window_end"]),
            "last_ts": ms(r["last_ts"])} for r in rows]
    return sorted(out, key=lambda r: (r["window_end"], r["window_start"], r["meter"]))


def matches_oracle(door: str, rows: list[dict[str, Any]], tables: list[pa.Table]) -> str:
    """Assert ``rows`` are exactly the oracle's (floats bit for bit); their digest.""" 
    got, want = normalised(rows), normalised(oracle(tables))
    assert len(got) == len(want), (door, len(got), len(want))
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys(), door
        for name, value in b.items():
            same = (a[name].hex() == value.hex() if isinstance(value, float)
                    and isinstance(a[name], float) else a[name] == value)
            assert same, (door, name, a, b)
    text = json.dumps([[r[k] if not isinstance(r[k], float) else r[k].hex() for k in sorted(r)]
                       for r in got])
    return hashlib.sha256(text.encode()).hexdigest()
