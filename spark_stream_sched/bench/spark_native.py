"""Spark's native way vs ``ordered-agg``: throughput, determinism and ``first()`` correctness.

Both run end to end on the same generated smart-grid files (default 2 M rows, 8 inputs, 1000
keys, 30 s windows sliding by 3 s), on the same SparkSession, with ``Trigger.AvailableNow``,
writing Parquet:

* **native**: ``union`` of N file streams + ``withWatermark`` + ``groupBy(window, key)`` with
  ``count``, ``avg`` and ``first`` (append mode);
* **ordered-agg**: ``spark.readStream.format("ordered-agg")`` over the same N directories;
* **ordered-agg sink** (``--engines``): the native union of N file streams written with
  ``writeStream.format("ordered-agg")``, then ``finish_sink``.

For each engine the same query runs ``runs`` times with batching A and once with batching B
(``maxFilesPerTrigger`` for native and the sink, ``maxRecordsPerTrigger`` for the source, all
giving about the same rows per micro-batch). Reported: rows/s (input rows / query wall time,
best and median), whether all runs gave identical rows, whether batching B equals batching A,
and how often the emitted ``first(value)`` and ``count`` equal the truth. The truth is the first
event of each (window, key) in the total order ``(ts, input, seq)`` -- computed with the
reference oracle (:mod:`spark_stream_sched.testing.reference`) up to ``ORACLE_MAX_ROWS`` rows
and by the vectorised :func:`true_windows` (checked against the oracle in the tests) above that.

Run it as ``spark-stream-sched bench spark`` or ``python -m spark_stream_sched.bench.spark_native``.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError

logger = logging.getLogger(__name__)

#: Above this many rows the truth comes from :func:`true_windows` instead of the pure-Python
#: reference oracle (which needs minutes and gigabytes for millions of rows).
ORACLE_MAX_ROWS = 300_000
FILES_PER_INPUT = 16
AGGREGATES = ("count(*) as n", "avg(value) as mean", "first(value) as first_v")
#: Engines compared: Spark's native query, the ordered-agg source, the ordered-agg sink, and
#: the two floors of ``bench/spark_floor.py`` (Spark around a source that does no work).
ENGINES = ("native", "ordered-agg", "ordered-agg-sink", "floor-precomputed", "floor-empty")
#: Engines of the long-stream case (native would take minutes per run there).
LONG_ENGINES = ("ordered-agg", "floor-precomputed", "floor-empty")
Results = list[dict[str, Any]]
#: Pseudo key under which :func:`result_rows` records duplicate result rows.
DUPLICATES = (-1, -1)


# -- data and truth ----------------------------------------------------------------------------


def prepare_data(root: Path, rows: int, n_inputs: int, keys: int,
                 seed: int) -> tuple[list[Path], list[pa.Table]]:
    """Generate the smart-grid streams and write them as ordered Parquet file directories."""
    from spark_stream_sched.data.smart_grid import smart_grid_streams
    from spark_stream_sched.inputs import write_inputs
    from spark_stream_sched.jobs.runner import order_modification_times

    tables = smart_grid_streams(n_inputs, keys, rows=rows, seed=seed)
    dirs = write_inputs(tables, root / "input", "parquet", FILES_PER_INPUT)
    order_modification_times(dirs)
    return dirs, tables


def true_windows(tables: Sequence[pa.Table], size_ms: int,
                 slide_ms: int) -> dict[tuple[int, int], tuple[int, float]]:
    """Map ``(window_start, key)`` to ``(count, first value)`` in the total order.

    Every row is expanded to each window covering it; rows are ordered by
    ``(window, key, ts, input, seq)`` and the first of each (window, key) group is kept.
    """
    ts = np.concatenate([t.column("ts").to_numpy() for t in tables]).astype(np.int64)
    key = np.concatenate([t.column("meter").to_numpy() for t in tables]).astype(np.int64)
    value = np.concatenate([t.column("value").to_numpy(zero_copy_only=False) for t in tables])
    source = np.concatenate([np.full(t.num_rows, i) for i, t in enumerate(tables)])
    seq = np.concatenate([np.arange(t.num_rows) for t in tables])
    order = np.lexsort((seq, source, ts))
    ts, key, value = ts[order], key[order], value[order]
    per_row = size_ms // slide_ms + (1 if size_ms % slide_ms else 0)
    last_k = np.floor_divide(ts, slide_ms)
    starts, keys, rank = [], [], []
    position = np.arange(len(ts))
    for j in range(per_row):
        k = last_k - j
        inside = k * slide_ms + size_ms > ts
        starts.append(k[inside] * slide_ms)
        keys.append(key[inside])
        rank.append(position[inside])
    start, group_key, pos = np.concatenate(starts), np.concatenate(keys), np.concatenate(rank)
    grouped = np.lexsort((pos, group_key, start))
    start, group_key, pos = start[grouped], group_key[grouped], pos[grouped]
    head = np.ones(len(start), dtype=bool)
    head[1:] = (start[1:] != start[:-1]) | (group_key[1:] != group_key[:-1])
    bounds = np.append(np.flatnonzero(head), len(start))
    counts = np.diff(bounds)
    firsts = value[pos[head]]
    return {(int(s), int(k)): (int(c), float(f)) for s, k, c, f in
            zip(start[head], group_key[head], counts, firsts, strict=True)}


def reference_windows(tables: Sequence[pa.Table], size_ms: int,
                      slide_ms: int) -> dict[tuple[int, int], tuple[int, float]]:
    """The same map from the reference oracle (slow; small inputs only)."""
    from spark_stream_sched.runtime.window.spec import WindowSpec
    from spark_stream_sched.testing.reference import reference_aggregate

    rows = reference_aggregate(list(tables), WindowSpec(size_ms, slide_ms), ["meter"],
                               "count(*) as n, first(value) as first_v")
    return {(r["window_start"], r["meter"]): (r["n"], r["first_v"]) for r in rows}


# -- the two queries ---------------------------------------------------------------------------


def run_native(spark: Any, dirs: list[Path], schema: pa.Schema, out: Path, size: str,
               slide: str, watermark: str, files_per_trigger: int) -> float:
    """Union + watermark + sliding window + first(); return the query's wall time in seconds."""
    from pyspark.sql import functions as F  # noqa: N812

    from spark_stream_sched.jobs.runner import await_query, file_streams

    frame = file_streams(spark, dirs, "parquet", schema, files_per_trigger)
    result = (frame.withColumn("event_time", F.timestamp_millis("ts"))
              .withWatermark("event_time", watermark)
              .groupBy(F.window("event_time", size, slide), "meter")
              .agg(F.count("*").alias("n"), F.avg("value").alias("mean"),
                   F.first("value").alias("first_v"))
              .select(F.unix_millis(F.col("window.start")).alias("window_start"),
                      F.unix_millis(F.col("window.end")).alias("window_end"),
                      "meter", "n", "mean", "first_v"))
    started = time.perf_counter()
    query = (result.writeStream.format("parquet").outputMode("append")
             .option("path", str(out / "output")).option("checkpointLocation", str(out / "ck"))
             .trigger(availableNow=True).start())
    await_query(query)
    return time.perf_counter() - started


def ordered_options(dirs: list[Path], size: str, slide: str,
                    max_records: int | None) -> dict[str, str]:
    """Options of the ``ordered-agg`` query (no ``stateLocation``; None: default sizing)."""
    options = {"inputs": ",".join(str(d) for d in dirs), "keyColumns": "meter",
               "window": size, "slide": slide, "aggregates": ", ".join(AGGREGATES),
               "endOfInput": "availableNow"}
    if max_records is not None:
        options["maxRecordsPerTrigger"] = str(max_records)
    return options


def run_ordered(spark: Any, dirs: list[Path], out: Path, size: str, slide: str,
                max_records: int | None) -> float:
    """``readStream.format("ordered-agg")`` into Parquet; return the wall time in seconds."""
    from spark_stream_sched.jobs.runner import await_query
    from spark_stream_sched.spark import register

    register(spark)
    options = {**ordered_options(dirs, size, slide, max_records),
               "stateLocation": str(out / "state")}
    frame = spark.readStream.format("ordered-agg").options(**options).load()
    started = time.perf_counter()
    query = (frame.writeStream.format("parquet").option("path", str(out / "output"))
             .option("checkpointLocation", str(out / "ck")).trigger(availableNow=True).start())
    await_query(query)
    return time.perf_counter() - started


def run_sink(spark: Any, dirs: list[Path], schema: pa.Schema, out: Path, size: str,
             slide: str, files_per_trigger: int) -> float:
    """Native file streams into ``writeStream.format("ordered-agg")``; return the wall time."""
    from spark_stream_sched.jobs.runner import (
        INPUT_ID_COLUMN,
        SEQUENCE_COLUMN,
        await_query,
        file_streams,
    )
    from spark_stream_sched.spark import register
    from spark_stream_sched.spark.sink import finish_sink

    register(spark)
    frame = file_streams(spark, dirs, "parquet", schema, files_per_trigger, with_position=True)
    options = {"path": str(out / "output"), "checkpointLocation": str(out / "ck"),
               "inputs": str(len(dirs)), "inputColumn": INPUT_ID_COLUMN, "keyColumns": "meter",
               "sequenceColumn": SEQUENCE_COLUMN,
               "window": size, "slide": slide, "aggregates": ", ".join(AGGREGATES)}
    started = time.perf_counter()
    query = (frame.writeStream.format("ordered-agg").options(**options)
             .trigger(availableNow=True).start())
    await_query(query)
    finish_sink(options)
    return time.perf_counter() - started


# -- comparing results -------------------------------------------------------------------------


def result_rows(out: Path) -> dict[tuple[int, int], tuple[int, float, float]]:
    """``(window_start, key) -> (count, avg, first)`` from a run's committed Parquet output."""
    from spark_stream_sched.jobs.results import read_output

    table = read_output(out / "output", ["meter"])
    if table.num_rows == 0:
        return {}
    cols = [table.column(c).to_pylist() for c in ("window_start", "meter", "n", "mean",
                                                    "first_v")]
    rows: dict[tuple[int, int], tuple[int, float, float]] = {}
    duplicates = 0
    for start, key, n, mean, first in zip(*cols, strict=True):
        duplicates += (start, key) in rows
        rows[(start, key)] = (n, mean, first)
    if duplicates:
        logger.warning("%s: %d duplicate (window, key) result rows", out, duplicates)
        rows[DUPLICATES] = (duplicates, 0.0, 0.0)  # makes the run differ from a clean one
    return rows


def differing(a: dict[Any, Any], b: dict[Any, Any]) -> int:
    """Number of (window, key) rows present in only one run or with different values."""
    return sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _first_differs(a: dict[Any, Any], b: dict[Any, Any]) -> float | None:
    """Share (%) of the windows emitted by both runs whose ``first`` differs."""
    common = [k for k in a.keys() & b.keys() if k != DUPLICATES]
    if not common:
        return None
    return round(100.0 * sum(1 for k in common if a[k][2] != b[k][2]) / len(common), 2)


def _truth_scores(rows: dict[tuple[int, int], tuple[int, float, float]],
                  truth: dict[tuple[int, int], tuple[int, float]]) -> dict[str, Any]:
    rows_dup = rows.get(DUPLICATES, (0,))[0]
    rows = {k: v for k, v in rows.items() if k != DUPLICATES}
    emitted = [k for k in rows if k in truth]
    first_ok = sum(1 for k in emitted if rows[k][2] == truth[k][1])
    count_ok = sum(1 for k in emitted if rows[k][0] == truth[k][0])

    def share(n: int) -> float | None:
        return round(100.0 * n / len(emitted), 2) if emitted else None

    return {"windows_emitted": len(rows), "windows_true": len(truth),
            "duplicate_rows": rows_dup,
            "first_matches_pct": share(first_ok), "count_matches_pct": share(count_ok)}


# -- the benchmark -----------------------------------------------------------------------------


def run(rows: int = 2_000_000, n_inputs: int = 8, keys: int = 1000, size: str = "30 seconds",
        slide: str = "3 seconds", watermark: str = "10 seconds", runs: int = 3,
        batchings: tuple[int, int] = (4, 1), seed: int = 0, workdir: str | None = None,
        master: str = "local[*]", show_progress: bool = True,
        engines: Sequence[str] = ENGINES, long_rows: int = 0) -> Results:
    """Run every engine ``runs`` times with batching A and once with batching B.

    ``batchings`` are files per input per micro-batch for native (A, B); ordered-agg gets
    ``maxRecordsPerTrigger`` of the same number of rows. The floors replay the source's
    batching-A micro-batches. With ``long_rows`` a second case of that many rows runs the
    source with its default ``Trigger.AvailableNow`` sizing and its floors (:data:`LONG_ENGINES`).
    """
    from spark_stream_sched.jobs import spark_env

    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sss-bench-spark-"))
    try:
        spark = spark_env.get_spark(None, master)
        results = _run_case("main", spark, root / "main", rows, n_inputs, keys, size, slide,
                            watermark, runs, batchings, seed, show_progress, engines)
        if long_rows:
            long_engines = [e for e in LONG_ENGINES if e in engines]
            results += _run_case("long", spark, root / "long", long_rows, n_inputs, keys, size,
                                 slide, watermark, runs, None, seed, show_progress,
                                 long_engines)
        return results
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _run_case(case: str, spark: Any, root: Path, rows: int, n_inputs: int, keys: int,
              size: str, slide: str, watermark: str, runs: int,
              batchings: tuple[int, int] | None, seed: int, show_progress: bool,
              engines: Sequence[str]) -> Results:
    """One workload: every engine ``runs`` times (A), once with batching B (not the floors).

    ``batchings`` None: the source with its default sizing, no batching B.
    """
    from spark_stream_sched.bench.spark_floor import (
        FLOORS,
        batches_run,
        prepare_floor,
        run_floor,
    )
    from spark_stream_sched.runtime.window.spec import parse_duration

    size_ms, slide_ms = parse_duration(size, "window"), parse_duration(slide, "slide")
    dirs, tables = prepare_data(root, rows, n_inputs, keys, seed)
    truth = (reference_windows(tables, size_ms, slide_ms) if rows <= ORACLE_MAX_ROWS
             else true_windows(tables, size_ms, slide_ms))
    schema = tables[0].schema
    del tables
    rows_per_file = rows / (n_inputs * FILES_PER_INPUT)

    def limit(files: int) -> int | None:
        return None if batchings is None else max(1, int(files * n_inputs * rows_per_file))

    floor_shape = (0, 0)
    if any(e in FLOORS for e in engines):
        floor_shape = prepare_floor(ordered_options(dirs, size, slide, limit(
            batchings[0] if batchings else 0)), root / "floor")

    def make(engine: str, tag: str, files: int) -> Callable[[], float]:
        out = root / tag
        if engine == "native":
            return lambda: run_native(spark, dirs, schema, out, size, slide, watermark, files)
        if engine == "ordered-agg":
            return lambda: run_ordered(spark, dirs, out, size, slide, limit(files))
        if engine == "ordered-agg-sink":
            return lambda: run_sink(spark, dirs, schema, out, size, slide, files)
        return lambda: run_floor(spark, engine, root / "floor", *floor_shape, out)

    plan = [(engine, i, "A") for i in range(runs) for engine in engines]
    if batchings is not None:
        plan += [(engine, runs, "B") for engine in engines if engine not in FLOORS]
    seconds: dict[str, list[float]] = {engine: [] for engine in engines}
    batches: dict[str, int] = {}
    outputs: dict[tuple[str, str], list[dict[Any, Any]]] = {}
    for engine, i, batching in plan:
        tag = f"{engine}-{batching}-{i}"
        files = (batchings[0] if batching == "A" else batchings[1]) if batchings else 0
        logger.info("bench spark %s: %s", case, tag)
        if show_progress:
            print(f"  running {case} {tag} ...", file=sys.stderr, flush=True)
        elapsed = make(engine, tag, files)()
        if batching == "A":
            seconds[engine].append(elapsed)
            batches[engine] = batches_run(root / tag)
        outputs.setdefault((engine, batching), []).append(result_rows(root / tag))
        shutil.rmtree(root / tag / "state", ignore_errors=True)
    results = [_summarise(engine, rows, n_inputs, keys, size, slide, watermark,
                          batchings or (0, 0), seconds[engine], outputs[(engine, "A")],
                          outputs.get((engine, "B"), [None])[0], truth,
                          "reference" if rows <= ORACLE_MAX_ROWS else "true_windows")
               for engine in engines]
    floor = {r["engine"]: r["seconds_median"] for r in results}
    for r in results:
        r.update(case=case, micro_batches=batches[r["engine"]],
                 x_floor=_ratio(r["seconds_median"], floor.get("floor-precomputed")),
                 x_empty_floor=_ratio(r["seconds_median"], floor.get("floor-empty")),
                 speedup_vs_native=_ratio(floor.get("native"), r["seconds_median"]))
    return results


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def _summarise(engine: str, rows: int, n_inputs: int, keys: int, size: str, slide: str,
               watermark: str, batchings: tuple[int, int], seconds: list[float],
               runs_a: list[dict[Any, Any]], run_b: dict[Any, Any] | None,
               truth: dict[tuple[int, int], tuple[int, float]], oracle: str) -> dict[str, Any]:
    first = runs_a[0]
    between_runs = max((differing(first, other) for other in runs_a[1:]), default=0)
    # Share of windows whose first() differs between any two runs of the same batching.
    first_unstable = sum(1 for k in first if len({r.get(k, (None,) * 3)[2] for r in runs_a}) > 1)
    return {
        "bench": "spark", "engine": engine, "rows": rows, "inputs": n_inputs, "keys": keys,
        "window": size, "slide": slide,
        "watermark": watermark if engine == "native" else None,
        "batching_a": batchings[0], "batching_b": batchings[1], "runs": len(seconds),
        "seconds": [round(s, 2) for s in seconds],
        "seconds_median": round(statistics.median(seconds), 3),
        "rows_per_s_best": round(rows / min(seconds)), "rows_per_s_median":
            round(rows / statistics.median(seconds)),
        "identical_over_runs": between_runs == 0, "rows_differing_over_runs": between_runs,
        "first_differs_over_runs_pct": round(100.0 * first_unstable / len(first), 2)
        if first else None,
        "identical_across_batchings": None if run_b is None else differing(first, run_b) == 0,
        "first_differs_across_batchings_pct": None if run_b is None
        else _first_differs(first, run_b),
        "rows_differing_across_batchings": None if run_b is None else differing(first, run_b),
        "matches_truth": _matches(first, truth),
        "oracle": oracle, **_truth_scores(first, truth),
    }


def _matches(rows: dict[Any, Any], truth: dict[tuple[int, int], tuple[int, float]]) -> bool:
    """Every true (window, key) emitted once with the true count and first value, no other."""
    if DUPLICATES in rows or rows.keys() != truth.keys():
        return False
    return all(rows[k][0] == truth[k][0] and rows[k][2] == truth[k][1] for k in truth)


COLUMNS = (("case", "case"), ("engine", "engine"), ("micro_batches", "batches"),
           ("seconds_median", "median s"), ("x_floor", "x floor"),
           ("x_empty_floor", "x empty floor"), ("speedup_vs_native", "native/this"),
           ("matches_truth", "= truth"), ("rows_per_s_best", "rows/s best"),
           ("rows_per_s_median", "rows/s median"), ("identical_over_runs", "same over runs"),
           ("rows_differing_over_runs", "rows differing"),
           ("identical_across_batchings", "same across batchings"),
           ("rows_differing_across_batchings", "rows differing"),
           ("first_differs_across_batchings_pct", "first() changed %"),
           ("windows_emitted", "windows out"), ("first_matches_pct", "first() = truth %"),
           ("count_matches_pct", "count = truth %"))


def format_results(results: Results) -> str:
    """Render the comparison as a text table plus a line describing the workload."""
    from spark_stream_sched.bench.common import format_table

    if not results:
        return "(no results)"
    r = results[0]
    cases = sorted({(x.get("case", ""), x["rows"]) for x in results}, key=lambda c: c[1])
    sizes = ", ".join(f"{name} {n:,} rows" for name, n in cases)
    head = (f"{sizes}; {r['inputs']} inputs, {r['keys']} keys, window {r['window']} "
            f"/ slide {r['slide']}, native watermark {results[0]['watermark']}, batchings "
            f"{r['batching_a']} vs {r['batching_b']} files per input per batch, "
            f"{r['runs']} runs, truth from {r['oracle']}; long case: default AvailableNow sizing; "
            f"x floor = median / floor-precomputed median of the same case")
    return head + "\n" + format_table(results, COLUMNS)


# -- command line ------------------------------------------------------------------------------


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench spark`` beyond the shared ``--rows``/``--repeat``/``--json``/``--seed``."""
    parser.add_argument("--inputs", type=int, default=8, help="input streams (default 8)")
    parser.add_argument("--keys", type=int, default=1000, help="distinct keys (default 1000)")
    parser.add_argument("--window", default="30 seconds", help="window size (default 30 s)")
    parser.add_argument("--slide", default="3 seconds", help="slide (default 3 s)")
    parser.add_argument("--watermark", default="10 seconds",
                        help="native watermark delay (default 10 seconds)")
    parser.add_argument("--batchings", default="4,1",
                        help="files per input per micro-batch for runs A and B (default 4,1)")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help=f"comma-separated subset of {', '.join(ENGINES)} (default: all)")
    parser.add_argument("--workdir", help="keep data and outputs here (default: temp, removed)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--long-rows", type=int, default=None,
                        help="rows of the long-stream case (default 8,000,000; 0: skip; "
                             "--quick: skip)")


def run_bench(args: argparse.Namespace) -> Results:
    """``bench spark`` entry: ``--rows`` (default 2 M; ``--quick`` 20 k), ``--repeat`` runs."""
    try:
        a, b = (int(v) for v in str(args.batchings).split(","))
    except ValueError:
        raise ConfigError(
            f"--batchings {args.batchings!r}: expected two integers like 4,1") from None
    engines = [e.strip() for e in str(args.engines).split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown or not engines:
        raise ConfigError(f"--engines {args.engines!r}: choose from {', '.join(ENGINES)}")
    rows = args.rows or (20_000 if getattr(args, "quick", False) else 2_000_000)
    runs = args.repeat or (1 if getattr(args, "quick", False) else 3)
    return run(rows=rows, n_inputs=args.inputs, keys=args.keys, size=args.window,
               slide=args.slide, watermark=args.watermark, runs=runs, batchings=(a, b),
               seed=args.seed, workdir=args.workdir, master=args.master,
               show_progress=not getattr(args, "no_progress", False), engines=engines,
               long_rows=_long_rows(args))


def _long_rows(args: argparse.Namespace) -> int:
    """``--long-rows``: 8 M by default, none with ``--quick``."""
    value = getattr(args, "long_rows", None)
    if value is None:
        return 0 if getattr(args, "quick", False) else 8_000_000
    if value < 0:
        raise ConfigError(f"--long-rows {value}: must be >= 0")
    return int(value)


#: ``Bench(*BENCH)`` in ``commands/bench.py``: help, add_args, run, format.
BENCH = ("Spark native union+watermark+window+first() vs ordered-agg, end to end",
         add_args, run_bench, format_results)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_stream_sched.bench.spark_native [--rows N] [--json]``."""
    parser = argparse.ArgumentParser(prog="spark_native", description=BENCH[0])
    parser.add_argument("--rows", type=int, default=None, help="rows (default 2,000,000)")
    parser.add_argument("--repeat", type=int, default=None, help="runs with batching A (3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, one run")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE")
    add_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    results = run_bench(args)
    if args.json is not None:
        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    if args.json != "-":
        print(format_results(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
