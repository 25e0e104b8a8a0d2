"""Window benchmark: Gulisano et al. (2016), Table 2 queries, runtime vs the MQ baseline.

Each query is run by the runtime (:class:`~spark_stream_sched.runtime.query.OrderedAggregation`,
S-Merge + vectorised pane aggregation) and by MQ (:class:`~spark_stream_sched.testing.baselines.
MQAggregate`, Gulisano et al. (2016), Algorithm 2, per tuple), both fed round-robin in
``batch_rows`` packets per input. Query names follow Table 2: ``k``/``K`` few (243 meters) / many
(40,000 songs) keys, ``w``/``W`` 10 / 20 windows per tuple, ``f``/``F`` a cheap / costly per-tuple
function; ``OS`` order-sensitive (``first``), ``OI`` order-insensitive (``count``, ``avg``).
``sg-sliding`` is the smart-grid count/avg/first query over 30 s windows sliding by 3 s;
``sg-sliding-plain`` is the same query with plain float64 sums instead of exactly rounded ones
(:mod:`.plain_sums`, bench only), so that one run shows what the rule costs.

MQ is slow, so it runs on ``baseline_rows`` rows of the same generator; the runtime also runs
on those rows (untimed) and its result is compared with MQ's (column ``match``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from spark_stream_sched.bench.common import (
    DEFAULT_BATCH_ROWS,
    best_of,
    feed_round_robin,
    format_table,
    progress,
    rate,
)
from spark_stream_sched.bench.plain_sums import plain_float_sums
from spark_stream_sched.data.smart_grid import smart_grid_streams
from spark_stream_sched.data.soundcloud import IP_REGEX, MAIL_REGEX, soundcloud_streams
from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.baselines import mq_aggregate, results_difference

_MAIL = f"text rlike '{MAIL_REGEX}'"
_MAIL_OR_IP = f"{_MAIL} or text rlike '{IP_REGEX}'"


@dataclass(frozen=True)
class Query:
    """One benchmark query: dataset, window (seconds), group-by key and aggregates."""

    name: str
    dataset: str  # "smart_grid" | "soundcloud"
    size_s: int
    slide_s: int
    key: str
    aggregates: tuple[str, ...]
    sums: str = "exact"  # "plain": float64 sums (bench.plain_sums), to measure the rule's cost


QUERIES: tuple[Query, ...] = (
    Query("k-OS", "smart_grid", 30, 3, "meter", ("first(value) as first_value",)),
    Query("K-OS", "soundcloud", 30, 3, "song", ("first(text) as first_text",)),
    Query("w-OS", "smart_grid", 20, 2, "meter", ("first(value) as first_value",)),
    Query("W-OS", "smart_grid", 40, 2, "meter", ("first(value) as first_value",)),
    Query("f-OS", "soundcloud", 20, 2, "song", (f"first_where(text, {_MAIL}) as first_mail",)),
    Query("F-OS", "soundcloud", 20, 2, "song",
          (f"first_where(text, {_MAIL_OR_IP}) as first_mail_ip",)),
    Query("k-OI", "smart_grid", 30, 3, "meter", ("count(*) as n",)),
    Query("K-OI", "soundcloud", 30, 3, "song", ("count(*) as n",)),
    Query("w-OI", "smart_grid", 20, 2, "meter", ("avg(value) as mean",)),
    Query("W-OI", "smart_grid", 40, 2, "meter", ("avg(value) as mean",)),
    Query("f-OI", "soundcloud", 20, 2, "song", (f"count_where({_MAIL}) as n_mail",)),
    Query("F-OI", "soundcloud", 20, 2, "song", (f"count_where({_MAIL_OR_IP}) as n_mail_ip",)),
    Query("sg-sliding", "smart_grid", 30, 3, "meter",
          ("count(*) as n", "avg(value) as mean", "first(value) as first_value")),
    Query("sg-sliding-plain", "smart_grid", 30, 3, "meter",
          ("count(*) as n", "avg(value) as mean", "first(value) as first_value"), "plain"),
)
QUERY_NAMES = tuple(q.name for q in QUERIES)

_GENERATORS: dict[str, Callable[..., list[pa.Table]]] = {
    "smart_grid": lambda n, rows, seed: smart_grid_streams(n, rows=rows, seed=seed),
    "soundcloud": lambda n, rows, seed: soundcloud_streams(n, rows, seed=seed),
}


def select_queries(names: Sequence[str] | None) -> list[Query]:
    """Return the queries called ``names`` (all when None); ConfigError for unknown names."""
    if names is None:
        return list(QUERIES)
    unknown = [n for n in names if n not in QUERY_NAMES]
    if unknown:
        raise ConfigError(f"unknown window queries {unknown}; choose from {', '.join(QUERY_NAMES)}")
    return [q for q in QUERIES if q.name in names]


def run_runtime(query: Query, inputs: Sequence[pa.Table], batch_rows: int) -> pa.Table:
    """Run ``query`` on the runtime, streaming ``inputs`` in packets; return all output rows."""
    spec = WindowSpec(query.size_s * 1000, query.slide_s * 1000)
    agg = OrderedAggregation(len(inputs), spec, [query.key], list(query.aggregates),
                             input_schema=inputs[0].schema)
    with plain_float_sums() if query.sums == "plain" else nullcontext():
        return pa.concat_tables(feed_round_robin(agg, inputs, batch_rows, agg.poll))


def run_mq(query: Query, inputs: Sequence[pa.Table], batch_rows: int) -> pa.Table:
    """Run ``query`` on the MQ baseline; return all output rows."""
    return mq_aggregate(inputs, query.size_s * 1000, query.slide_s * 1000, [query.key],
                        list(query.aggregates), batch_rows=batch_rows)


def bench_query(query: Query, data: Sequence[pa.Table], small: Sequence[pa.Table], repeat: int,
                batch_rows: int) -> dict[str, Any]:
    """Measure one query on the runtime (``data``) and MQ (``small``); return the result dict."""
    rows, small_rows = sum(t.num_rows for t in data), sum(t.num_rows for t in small)
    ours_s, out = best_of(repeat, lambda: run_runtime(query, data, batch_rows))
    base_s, expected = best_of(repeat, lambda: run_mq(query, small, batch_rows))
    difference = results_difference(run_runtime(query, small, batch_rows), expected)
    ours_rate, base_rate = rate(rows, ours_s), rate(small_rows, base_s)
    return {
        "bench": "window", "case": query.name, "dataset": query.dataset,
        "window": f"{query.size_s}s/{query.slide_s}s", "key": query.key,
        "aggregates": list(query.aggregates), "inputs": len(data),
        "rows": rows, "seconds": ours_s, "rows_per_s": ours_rate, "output_rows": out.num_rows,
        "baseline": "MQ", "baseline_rows": small_rows, "baseline_seconds": base_s,
        "baseline_rows_per_s": base_rate, "ratio": ours_rate / base_rate if base_rate else None,
        "match": difference is None, "difference": difference,
        "repeat": repeat, "batch_rows": batch_rows,
    }


def run(queries: Sequence[str] | None = None, rows: int = 1_000_000, n_inputs: int = 8,
        baseline_rows: int = 50_000, repeat: int = 3, batch_rows: int = DEFAULT_BATCH_ROWS,
        seed: int = 0, show_progress: bool = True) -> list[dict[str, Any]]:
    """Run the window benchmark; return one result dict per query.

    Parameters
    ----------
    queries : sequence of str, optional
        Query names from :data:`QUERY_NAMES` (default: all).
    rows : int
        Total rows over all inputs for the runtime.
    n_inputs : int
        Number of input streams.
    baseline_rows : int
        Rows for the MQ baseline (capped at ``rows``); the runtime's result on the same rows
        is compared with MQ's.
    repeat : int
        Runs per measurement; the best (shortest) is reported.
    batch_rows : int
        Rows per input per push.
    seed : int
        Data generator seed.
    show_progress : bool
        Show a tqdm bar on stderr (only on a terminal).
    """
    selected = select_queries(queries)
    baseline_rows = min(baseline_rows, rows)
    datasets: dict[tuple[str, int], list[pa.Table]] = {}
    results = []
    with progress(len(selected), "bench window", show_progress) as bar:
        for query in selected:
            for n in {rows, baseline_rows}:
                if (query.dataset, n) not in datasets:
                    datasets[query.dataset, n] = _GENERATORS[query.dataset](n_inputs, n, seed)
            big, small = datasets[query.dataset, rows], datasets[query.dataset, baseline_rows]
            results.append(bench_query(query, big, small, repeat, batch_rows))
            bar.set_postfix_str(query.name)
            bar.update()
    return results


COLUMNS = (
    ("case", "query"), ("window", "window"), ("key", "key"), ("rows", "rows"),
    ("rows_per_s", "runtime t/s"), ("baseline_rows", "MQ rows"),
    ("baseline_rows_per_s", "MQ t/s"), ("ratio", "speed-up"), ("match", "same result"),
)


def format_results(results: Sequence[dict[str, Any]]) -> str:
    """Render window results as a table with a note on how they were measured."""
    note = ("runtime: S-Merge + vectorised panes; MQ: Gulisano et al. (2016), Algorithm 2, one "
            "tuple at a "
            "time in Python. Both streamed in packets; rates in tuples/s, best of repeat runs")
    if any(r["baseline_rows"] != r["rows"] for r in results):
        note += "; MQ measured on fewer rows (see 'MQ rows'), so compare rates, not times"
    lines = [format_table(results, COLUMNS), note + "."]
    lines += [f"{r['case']}: results differ: {r['difference']}" for r in results if not r["match"]]
    return "\n".join(lines)
