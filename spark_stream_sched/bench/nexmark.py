"""``bench nexmark``: Nexmark queries on the runtime, the Spark source and native Spark.

One run generates the events once (:func:`~spark_stream_sched.data.nexmark.write_nexmark`), in
two file layouts of the same rows (batchings A and B), then runs every query of ``queries`` on
every engine of ``engines``:

* **runtime**: the command-line runtime, ``spark-stream-sched aggregate`` as docs/nexmark.md
  writes the query, called in this process (:func:`spark_stream_sched.cli.main`);
* **source**: ``spark.readStream.format("ordered-agg")`` with the same query as source options,
  ``Trigger.AvailableNow``, one micro-batch per file of the layout (``maxRecordsPerTrigger``),
  into Spark's Parquet sink;
* **native**: the query a careful Spark user writes (:mod:`.nexmark_spark`): a Parquet file
  stream, one file per micro-batch, ``withWatermark``, append mode.

Every engine reads ``bid/`` only (q7 and q11 are queries of bids). Reported per query and
engine: the median over ``repeat`` runs of batching A of the CPU seconds of all processes (this
process's, whose threads run the runtime and the py4j client, and for Spark every descendant:
the JVM and its Python workers, :mod:`.spark_cpu`) and of the wall seconds, the events per CPU
second (the generator's event count, persons and auctions included, as Nexmark counts
throughput) and per bid, whether every run's output equals the reference, and whether batching
B gives the same rows as A. Native Spark's append mode leaves the windows and sessions the last
watermark has not passed open at the end of a finite stream: for it ``matches_reference`` says
that every row it emitted is a reference row, emitted once, and ``left_open`` counts the rest.

The references are DuckDB SQL written from the queries' definitions (:data:`REFERENCE_SQL`),
over the same files, compared row for row after sorting; the DuckDB run is reported too, as a
batch engine beside the streaming ones.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.bench.common import bench_extra, format_table, progress
from spark_stream_sched.errors import ConfigError

Record = dict[str, Any]
Rows = list[tuple[Any, ...]]

#: Engines in the order they run.
ENGINES = ("runtime", "source", "native")
#: Bid files of batchings A and B (of sizes with no boundary in common but the ends).
LAYOUTS = {"A": 10, "B": 27}
#: Bids per event in the Nexmark model (46 of every 50 events).
_BID_SHARE = 46 / 50


def rows_per_file(events: int, batching: str) -> int:
    """Rows per file of ``batching``'s layout for ``events`` events (one micro-batch each)."""
    return max(1, -(-round(events * _BID_SHARE) // LAYOUTS[batching]))


@dataclass(frozen=True)
class Query:
    """One Nexmark query as each engine is given it, and the columns its result is compared on."""

    name: str
    title: str
    cli: tuple[str, ...]
    source: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]


#: q7's aggregates (docs/nexmark.md): every column from the highest bid, ties to the earliest.
_Q7_AGGREGATES = ("max(price) as price", "max_by(auction, price) as auction",
                  "max_by(bidder, price) as bidder", "max_by(event_id, price) as event_id")

QUERIES = {
    "q7": Query("q7", "highest bid per tumbling 10 s window",
                ("--timestamp", "date_time", "--window", "10s",
                 *(a for agg in _Q7_AGGREGATES for a in ("--agg", agg))),
                (("window", "10 seconds"), ("aggregates", ", ".join(_Q7_AGGREGATES))),
                ("window_start", "window_end", "price", "auction", "bidder", "event_id")),
    "q11": Query("q11", "bids per bidder session, gap 10 s",
                 ("--timestamp", "date_time", "--key", "bidder", "--op",
                  "sessionize(10 seconds)", "--agg", "count(*) as bids"),
                 (("keyColumns", "bidder"), ("operators", "sessionize(10 seconds)"),
                  ("aggregates", "count(*) as bids")),
                 ("session_start", "session_end", "bidder", "bids")),
}

#: The references, from the definitions: q7, per 10 s window of event time the bid of the
#: highest price, of equal prices the smallest ``event_id``; q11, per bidder, a bid less than
#: 10 s after the bidder's previous bid continues its session, and a session ends 10 s after
#: its last bid. ``{bids}`` is the glob of the bid files. Times in epoch milliseconds.
REFERENCE_SQL = {
    "q7": """
        SELECT window_start, window_start + 10000 AS window_end, price, auction, bidder, event_id
        FROM (SELECT *, row_number() OVER (PARTITION BY window_start
                                           ORDER BY price DESC, event_id) AS place
              FROM (SELECT *, epoch_ms(date_time) // 10000 * 10000 AS window_start
                    FROM read_parquet('{bids}')))
        WHERE place = 1""",
    "q11": """
        WITH bids AS (SELECT bidder, epoch_ms(date_time) AS ts, event_id
                      FROM read_parquet('{bids}')),
             marked AS (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY bidder
                                                               ORDER BY ts, event_id) < 10000
                                       THEN 0 ELSE 1 END AS starts
                        FROM bids),
             numbered AS (SELECT *, sum(starts) OVER (PARTITION BY bidder ORDER BY ts, event_id
                                                      ROWS UNBOUNDED PRECEDING) AS session
                          FROM marked)
        SELECT min(ts) AS session_start, max(ts) + 10000 AS session_end, bidder,
               count(*) AS bids
        FROM numbered GROUP BY bidder, session""",
}


def run(events: int = 10_000_000, queries: Sequence[str] = tuple(QUERIES),
        engines: Sequence[str] = ENGINES, repeat: int = 3, seed: int = 0,
        master: str = "local[*]", workdir: str | None = None,
        show_progress: bool = True) -> list[Record]:
    """Generate ``events`` events, then run every query on every engine (module doc).

    ``workdir`` keeps the events and outputs (default: a temporary directory, removed).
    """
    unknown = sorted(set(queries) - set(QUERIES)) + sorted(set(engines) - set(ENGINES))
    if unknown:
        raise ConfigError(f"bench nexmark: unknown query or engine {', '.join(unknown)}; "
                          f"queries are {', '.join(QUERIES)}, engines {', '.join(ENGINES)}")
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sss-bench-nexmark-"))
    try:
        results, layouts = _generate(root, events, seed)
        spark = _spark(master) if {"source", "native"} & set(engines) else None
        total = len(queries) * (1 + len(engines) * (repeat + 1))
        with progress(total, "bench nexmark", show_progress) as bar:
            for name in queries:
                results += _run_query(QUERIES[name], engines, layouts, root / name, repeat,
                                      events, spark, bar)
        return results
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _spark(master: str) -> Any:
    from spark_stream_sched.spark import embedded

    return embedded.get_spark(app_name="spark-stream-sched-bench-nexmark", master=master)


def _generate(root: Path, events: int, seed: int) -> tuple[list[Record], dict[str, Path]]:
    """Write the events in both layouts; the row of layout A's generation, and the bid dirs."""
    from spark_stream_sched.data.nexmark import NexmarkConfig, write_nexmark

    config = NexmarkConfig(seed=seed)
    layouts, rows = {}, []
    for batching in LAYOUTS:
        with _cpu() as spent:
            counts = write_nexmark(root / f"events-{batching}", events, config,
                                   rows_per_file=rows_per_file(events, batching))
        layouts[batching] = root / f"events-{batching}" / "bid"
        if batching == "A":
            cpu_s, wall_s = spent()
            rows.append(_row("generate", "generator", events, counts["bid"], [cpu_s], [wall_s],
                             rows_out=sum(counts.values())))
    return rows, layouts


def _run_query(query: Query, engines: Sequence[str], layouts: dict[str, Path], out: Path,
               repeat: int, events: int, spark: Any, bar: Any) -> list[Record]:
    """The DuckDB reference, then every engine: ``repeat`` runs of A, one of B."""
    bids = sum(pq.ParquetFile(f).metadata.num_rows for f in layouts["A"].glob("*.parquet"))
    with _cpu() as spent:
        reference = reference_rows(query.name, layouts["A"])
    cpu_s, wall_s = spent()
    bar.update(1)
    results = [_row(query.name, "duckdb", events, bids, [cpu_s], [wall_s],
                    rows_out=len(reference))]
    for engine in engines:
        runner = _runner(engine, query, spark, events)
        cpus, walls, outputs = [], [], []
        for i, batching in enumerate(["A"] * repeat + ["B"]):
            target = out / f"{engine}-{i}"
            with _cpu(spark_processes=engine != "runtime") as spent:
                runner(layouts[batching], target, batching)
            cpu_s, wall_s = spent()
            if batching == "A":
                cpus.append(cpu_s)
                walls.append(wall_s)
            outputs.append(output_rows(target / "output", query.columns))
            shutil.rmtree(target, ignore_errors=True)
            bar.update(1)
        results.append(_row(query.name, engine, events, bids, cpus, walls,
                            rows_out=len(outputs[0]),
                            **_verdict(engine, outputs, reference)))
    return results


def _verdict(engine: str, outputs: list[Rows], reference: Rows) -> Record:
    """Output = reference (native: every emitted row is one, once) and A = B."""
    identical = outputs[-1] == outputs[0] and all(o == outputs[0] for o in outputs)
    if engine != "native":
        return {"matches_reference": all(o == reference for o in outputs),
                "identical_across_batchings": identical, "left_open": 0}
    want = set(reference)
    emitted = [len(set(o)) == len(o) and set(o) <= want for o in outputs]
    return {"matches_reference": all(emitted), "identical_across_batchings": identical,
            "left_open": len(want) - len(outputs[0])}


def _runner(engine: str, query: Query, spark: Any,
            events: int) -> Callable[[Path, Path, str], None]:
    """``run(bids, out, batching)``: one run of ``query`` writing ``out/output``."""
    if engine == "runtime":
        return lambda bids, out, batching: run_runtime(query, bids, out)
    from spark_stream_sched.bench import nexmark_spark

    if engine == "source":
        return lambda bids, out, batching: nexmark_spark.run_source(
            spark, dict(query.source), bids, out, rows_per_file(events, batching))
    return lambda bids, out, batching: nexmark_spark.run_native(spark, query.name, bids, out)


def run_runtime(query: Query, bids: Path, out: Path) -> None:
    """``spark-stream-sched aggregate --input bids <query> --out out/output/result.parquet``."""
    from spark_stream_sched.cli import main

    (out / "output").mkdir(parents=True)
    with contextlib.redirect_stdout(io.StringIO()):  # its summary line; the table says more
        code = main(["aggregate", "--input", str(bids), *query.cli,
                     "--out", str(out / "output" / "result.parquet")])
    if code != 0:
        raise RuntimeError(f"bench nexmark: the runtime's {query.name} exited with {code}")


def reference_rows(name: str, bids: Path) -> Rows:
    """The DuckDB reference of query ``name`` over the bid files under ``bids``, sorted."""
    duckdb = bench_extra("duckdb", "bench nexmark's references")
    sql = REFERENCE_SQL[name].format(bids=str(bids / "*.parquet").replace("'", "''"))
    connection = duckdb.connect()
    try:
        return sorted(connection.execute(sql).fetchall())
    finally:
        connection.close()


def output_rows(path: Path, columns: Sequence[str]) -> Rows:
    """The Parquet files under ``path`` as sorted tuples of ``columns``, times in epoch ms."""
    files = sorted(path.rglob("*.parquet"))
    if not files:
        return []
    table = pa.concat_tables([pq.read_table(f, columns=list(columns)) for f in files],
                             promote_options="permissive")
    arrays = [_millis(table.column(c)) for c in columns]
    return sorted(zip(*(a.to_pylist() for a in arrays), strict=True))


def _millis(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A timestamp column as int64 epoch milliseconds; any other column as it is."""
    if not pa.types.is_timestamp(column.type):
        return column
    return column.cast(pa.timestamp("ms", column.type.tz)).cast(pa.int64())


@contextlib.contextmanager
def _cpu(spark_processes: bool = False) -> Iterator[Callable[[], tuple[float, float]]]:
    """Measure the block: ``spent()`` gives (CPU seconds of all processes, wall seconds).

    CPU is this process's (every thread) and, with ``spark_processes``, that of every
    descendant process (:func:`.spark_cpu.measure`).
    """
    from spark_stream_sched.bench.spark_cpu import ROLES, measure

    figures: dict[str, float] = {}
    started, cpu = time.perf_counter(), time.process_time()
    with measure() if spark_processes else contextlib.nullcontext() as children:
        yield lambda: (figures["cpu"], figures["wall"])
    # the block is over here: spent() is called after it
    figures["wall"] = time.perf_counter() - started
    figures["cpu"] = time.process_time() - cpu
    if children is not None:
        figures["cpu"] += sum(children.by_role()[role] for role in ROLES)


def _row(query: str, engine: str, events: int, bids: int, cpus: list[float],
         walls: list[float], **extra: Any) -> Record:
    cpu_s, wall_s = statistics.median(cpus), statistics.median(walls)
    return {"bench": "nexmark", "query": query, "engine": engine, "events": events,
            "bids": bids, "runs": len(cpus), "cpu_s": round(cpu_s, 3), "wall_s": round(wall_s, 3),
            "events_per_cpu_s": round(events / cpu_s) if cpu_s > 0 else None,
            "events_per_s": round(events / wall_s) if wall_s > 0 else None,
            "bids_per_cpu_s": round(bids / cpu_s) if cpu_s > 0 else None,
            "matches_reference": None, "identical_across_batchings": None,
            "load_1m": round(os.getloadavg()[0], 2), **extra}


_COLUMNS = (("query", "query"), ("engine", "engine"), ("events", "events"),
            ("cpu_s", "CPU s"), ("wall_s", "wall s"), ("events_per_cpu_s", "events/CPU s"),
            ("events_per_s", "events/s"), ("rows_out", "rows out"),
            ("matches_reference", "= reference"), ("identical_across_batchings", "A = B"),
            ("left_open", "left open"), ("load_1m", "load"))


def format_results(results: Sequence[Record]) -> str:
    """The table, and how it was measured."""
    return (f"{format_table(results, _COLUMNS)}\n\n"
            "CPU s: median over batching-A runs of the CPU seconds of all processes (this one "
            "and Spark's JVM and Python workers); events/CPU s is the per-core figure. "
            "= reference: every run's rows equal DuckDB's (native: every emitted row is one; "
            "'left open' are those its append mode had not emitted at the end). A = B: "
            "batching B gave the same rows.")
