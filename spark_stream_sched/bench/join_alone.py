"""``bench join``: the runtime's N-way join alone vs a pandas merge and a DuckDB hash join.

Cases: 2-way and 3-way equi-joins on one int64 key, unwindowed over finite inputs and windowed
(``within=W``: every tuple of a result within ``W`` ms of the others), on the same generated
data (uniform keys; each input has one tuple per ms; the key domain is set so that a result
count of about twice the input is expected). In one run, side by side:

``runtime``
    ``join(N[, within=W])`` fed micro-batches of ``--batch-rows`` merged tuples with a valid
    ready bound (so the windowed join purges), then :meth:`finish` -- the streaming operator,
    results in a deterministic order;
``pandas``
    ``DataFrame.merge`` input by input, the window applied after each merge;
``duckdb``
    one SQL hash join (window as a join condition), ``SET threads = 1``.

Every engine's result multiset (the ``row`` ids of the partners) must be equal; at small sizes
the batch oracle (:func:`~spark_stream_sched.testing.join_reference.reference_join`) is checked
too. Rates are input tuples per second of wall time and per CPU second of this process (the
per-core figure; all three engines run on one thread here), medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.bench.adaptation_data import (
    KEYS,
    SCHEMA,
    merged,
    oracle_ids,
    result_ids,
    same,
)
from spark_stream_sched.bench.common import bench_extra, format_table, progress
from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.stage import StageSpec

Results = list[dict[str, Any]]
#: Oracle checks only up to this many expected results (it is a per-result Python loop).
ORACLE_LIMIT = 50_000
WINDOW_MS = 1_000


@dataclass(frozen=True)
class Case:
    """One join shape: inputs, window (None: unwindowed) and key domain size."""

    n_inputs: int
    within: int | None
    keys: int

    @property
    def name(self) -> str:
        """``"3-way windowed"`` etc."""
        return f"{self.n_inputs}-way {'unwindowed' if self.within is None else 'windowed'}"


def cases(rows: int) -> list[Case]:
    """The four shapes, keys chosen for about ``2 * rows`` results.

    Unwindowed: ``rows^N / K^(N-1)`` results; windowed: a tuple meets about ``2W / K`` tuples of
    another input, so ``rows * N * (W / K)^(N-1)``.
    """
    out = []
    for n in (2, 3):
        unwindowed = max(1, round(rows / 2 ** (1 / (n - 1))))
        windowed = max(1, round(WINDOW_MS * (n / 2) ** (1 / (n - 1))))
        out += [Case(n, None, unwindowed), Case(n, WINDOW_MS, windowed)]
    return out


def generate(case: Case, rows: int, seed: int) -> pa.Table:
    """Merged inputs with uniform keys in ``0 .. case.keys - 1``."""
    rng = np.random.default_rng(seed)
    return merged(rng.integers(0, case.keys, (rows, case.n_inputs), dtype=np.int64))


def run_runtime(table: pa.Table, case: Case, batch_rows: int) -> list[pa.Table]:
    """The streaming operator, batch by batch (bound = the next batch's first ts)."""
    kwargs = () if case.within is None else (("within", f"{case.within} ms"),)
    op = Join(StageSpec("join", (str(case.n_inputs),), kwargs), SCHEMA, KEYS, "ts")
    ts, out = table.column("ts").to_numpy(), []
    for lo in range(0, table.num_rows, batch_rows):
        hi = min(lo + batch_rows, table.num_rows)
        out.append(op.update(table.slice(lo, hi - lo), int(ts[hi]) if hi < len(ts) else None))
    out.append(op.finish())
    return out


def _inputs(table: pa.Table, case: Case, bucketed: bool) -> list[pa.Table]:
    """Each input's ``k, ts, row``; windowed and ``bucketed``: plus ``b``, a time bucket.

    Input 0 gets ``b = ts // W``; every other input is repeated with ``b = ts // W + d`` for
    ``d`` in -1, 0, 1. A partner within ``W`` ms of input 0's tuple lies in a neighbouring
    bucket, and exactly one of its copies has input 0's ``b``: joining on ``(k, b)`` then
    filtering ``max ts - min ts < W`` finds every result once, without the key-only
    intermediate (all equal-key pairs) that a naive plan builds.
    """
    ids = table.column("__input").to_numpy()
    parts = [table.filter(pa.array(ids == i)).select(["k", "ts", "row"])
             for i in range(case.n_inputs)]
    if case.within is None or not bucketed:
        return parts
    out = []
    for i, part in enumerate(parts):
        bucket = pc.divide(part.column("ts"), case.within)
        shifts = (0,) if i == 0 else (-1, 0, 1)
        out.append(pa.concat_tables([part.append_column("b", pc.add(bucket, d)) for d in shifts]))
    return out


def run_pandas(table: pa.Table, case: Case, bucketed: bool = True) -> list[pa.Table]:
    """``merge`` input by input on the key (and time bucket); the window filter after each."""
    frames = [t.to_pandas().add_suffix(f"_{i}")
              for i, t in enumerate(_inputs(table, case, bucketed))]
    on = ["k"] + (["b"] if "b_0" in frames[0] else [])
    out = frames[0]
    for i, frame in enumerate(frames[1:], start=1):
        out = out.merge(frame, left_on=[f"{c}_0" for c in on], right_on=[f"{c}_{i}" for c in on])
        if case.within is not None:
            times = out[[f"ts_{j}" for j in range(i + 1)]].to_numpy()
            out = out[times.max(axis=1) - times.min(axis=1) < case.within]
    return [pa.Table.from_pandas(out[[f"row_{j}" for j in range(case.n_inputs)]],
                                 preserve_index=False)]


def run_duckdb(table: pa.Table, case: Case, bucketed: bool = True) -> list[pa.Table]:
    """One SQL hash join on the key (and time bucket), the window as a condition; 1 thread."""
    duckdb = bench_extra("duckdb", "bench join")
    con = duckdb.connect()
    con.execute("SET threads = 1")
    inputs = _inputs(table, case, bucketed)
    for i, t in enumerate(inputs):
        con.register(f"t{i}", t)
    sql = f"SELECT {', '.join(f't{i}.row AS row_{i}' for i in range(case.n_inputs))} FROM t0"
    for i in range(1, case.n_inputs):
        sql += f" JOIN t{i} ON t{i}.k = t0.k"
        if "b" in inputs[0].column_names:
            sql += f" AND t{i}.b = t0.b"
        if case.within is not None:
            times = ", ".join(f"t{j}.ts" for j in range(i + 1))
            sql += f" AND greatest({times}) - least({times}) < {case.within}"
    columns = con.execute(sql).fetchnumpy()  # the same call in DuckDB 1.x and 2.x
    con.close()
    return [pa.table({name: np.asarray(values, np.int64) for name, values in columns.items()})]


def _measure(fn: Callable[[], list[pa.Table]], repeat: int, n_inputs: int
             ) -> tuple[float, float, np.ndarray]:
    """Median wall and CPU seconds of ``repeat`` runs, and the ids of the last run's results."""
    walls, cpus, ids = [], [], np.empty(0)
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        ids = result_ids(out, n_inputs)
    return statistics.median(walls), statistics.median(cpus), ids


def run(rows: int, repeat: int, seed: int, batch_rows: int, shown: bool = False,
        bucketed: bool = True) -> Results:
    """One row per (case, engine); ``equal`` compares every engine's multiset (and oracle)."""
    results: Results = []
    all_cases = cases(rows)
    with progress(len(all_cases) * 3, "bench join", shown) as bar:
        for case in all_cases:
            table = generate(case, rows, seed)
            engines = {"runtime": partial(run_runtime, table, case, batch_rows),
                       "pandas": partial(run_pandas, table, case, bucketed),
                       "duckdb": partial(run_duckdb, table, case, bucketed)}
            measured = {}
            for engine, fn in engines.items():
                measured[engine] = _measure(fn, repeat, case.n_inputs)
                bar.update(1)
            reference = measured["runtime"][2]
            oracle = (same(reference, oracle_ids(table, 16, case.n_inputs, case.within))
                      if len(reference) <= ORACLE_LIMIT else None)
            for engine, (wall, cpu, ids) in measured.items():
                results.append(_row(case, engine, table.num_rows, wall, cpu, ids, measured,
                                    oracle))
    return results


def _row(case: Case, engine: str, tuples: int, wall: float, cpu: float, ids: np.ndarray,
         measured: dict[str, tuple[float, float, np.ndarray]], oracle: bool | None
         ) -> dict[str, Any]:
    runtime_wall = measured["runtime"][0]
    return {"case": case.name, "engine": engine, "tuples": tuples, "results": len(ids),
            "wall_s": wall, "cpu_s": cpu, "tuples_per_s": tuples / wall if wall else 0.0,
            "tuples_per_cpu_s": tuples / cpu if cpu else 0.0,
            "runtime_speed_ratio": wall / runtime_wall if runtime_wall else 0.0,
            "equal": all(same(ids, other[2]) for other in measured.values()),
            "oracle_equal": oracle, "loadavg": os.getloadavg()[0]}


_COLUMNS = [("case", "case"), ("engine", "engine"), ("tuples", "input tuples"),
            ("results", "results"), ("tuples_per_s", "tuples/s (wall)"),
            ("tuples_per_cpu_s", "tuples/s per core (CPU)"),
            ("runtime_speed_ratio", "time / runtime time"),
            ("equal", "outputs equal"), ("oracle_equal", "oracle equal"), ("loadavg", "load")]


def format_results(results: Results) -> str:
    """One table; ratios within this run."""
    return (f"join alone: runtime join(N) vs pandas merge vs DuckDB (1 thread); window "
            f"{WINDOW_MS} ms; os.cpu_count()={os.cpu_count()}\n{format_table(results, _COLUMNS)}")


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench join`` (``--rows``: tuples per input)."""
    parser.add_argument("--batch-rows", type=int, default=65_536,
                        help="merged tuples per runtime update (default 65536)")
    parser.add_argument("--naive-window", action="store_true",
                        help="windowed baselines join on the key only, then filter the window "
                             "(default: on key and time bucket, see _inputs)")


def run_cli(args: argparse.Namespace) -> Results:
    """Sizes from the flags (``--quick``: 2,000 tuples per input, one run)."""
    return run(args.rows or (2_000 if args.quick else 200_000),
               args.repeat or (1 if args.quick else 3), args.seed, args.batch_rows,
               not args.no_progress, not args.naive_window)


def register(bench: Any) -> Any:
    """Return the ``BENCHES`` entry; ``bench`` is the CLI's ``Bench`` record type."""
    return bench("the runtime's N-way join alone (2/3-way, unwindowed/windowed) vs pandas "
                 "merge and DuckDB, outputs checked equal", add_args, run_cli, format_results)
