"""``spark-stream-sched aggregate``: ordered window aggregation over files, no Spark needed.

Each ``--input`` is one input stream: a directory whose files, sorted by name, hold the stream in
order (or a single file). The inputs are pushed into the runtime packet by packet, round-robin,
as a streaming source would deliver them, and the closed windows are written to ``--out``
(Parquet). Output columns: ``window_start``, ``window_end`` (int64 ms), the key columns, the
aggregate aliases.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.data.files import FORMATS, read_input
from spark_stream_sched.errors import InputError, OutOfOrderError
from spark_stream_sched.runtime.aggregates import parse_aggregates
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import default_packet_rows, iter_packets, row_bytes
from spark_stream_sched.runtime.query import OrderedAggregation
from spark_stream_sched.runtime.windows import WindowSpec


def register(sub: Any) -> None:
    """Add the ``aggregate`` sub-command to ``sub``."""
    p = sub.add_parser("aggregate", help="windowed aggregation over sorted input files",
                       description=__doc__.splitlines()[0])
    p.add_argument("--input", action="append", required=True, metavar="PATH",
                   help="one input stream (directory or file); repeat for each input")
    p.add_argument("--format", choices=sorted(FORMATS), default="parquet")
    p.add_argument("--timestamp", default="ts", metavar="COL",
                   help="event-time column: int64 ms or a timestamp (default: ts)")
    p.add_argument("--key", action="append", default=[], metavar="COL",
                   help="group-by column; repeat for several")
    p.add_argument("--window", required=True, help="window size, e.g. 30s")
    p.add_argument("--slide", help="window slide, e.g. 3s (default: the size, tumbling)")
    p.add_argument("--agg", action="append", required=True, metavar="EXPR",
                   help="aggregate, e.g. \"count(*) as n\"; repeat for several")
    p.add_argument("--out-of-order", choices=["fail", "drop"], default="fail")
    p.add_argument("--where", metavar="PRED",
                   help="keep only tuples matching this predicate before the windows, e.g. "
                        "\"kind = 'reading'\"; runs the plan on the threaded executor")
    p.add_argument("--scheduler", metavar="NAME",
                   help="run the plan (S-Merge -> [where] -> windows) on the threaded executor "
                        "under this scheduling strategy, e.g. fifo, chain, path_capacity; "
                        "the result is the same for every strategy")
    p.add_argument("--workers", type=int, default=1, help="executor worker threads (default 1)")
    p.add_argument("--out", required=True, metavar="FILE.parquet")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the aggregation described by ``args``; print a one-line summary."""
    spec = WindowSpec.parse(args.window, args.slide)
    aggregates = parse_aggregates(args.agg)
    started = time.perf_counter()
    inputs = [_read(i, path, args) for i, path in enumerate(args.input)]
    schema = _common_schema(inputs, args.input)
    query = OrderedAggregation(len(inputs), spec, args.key, aggregates, args.timestamp,
                               args.out_of_order, schema)
    if args.where or args.scheduler or args.workers != 1:
        out, dropped = _run_on_executor(args, inputs, schema, spec)
        _write(out, args.out)
        _summary(inputs, out, args.out, started, dropped)
        return 0
    rows = default_packet_rows(row_bytes(schema))
    streams = [iter(iter_packets(t.cast(schema), rows)) for t in inputs]
    results: list[pa.Table] = []
    live = set(range(len(inputs)))
    while live:
        for i in sorted(live):
            packet = next(streams[i], None)
            if packet is None:
                query.finish(i)
                live.discard(i)
                continue
            try:
                query.push(i, packet)
            except OutOfOrderError as exc:
                raise InputError(f"{args.input[i]}: {exc}") from exc
        results.append(query.poll())
    out = pa.concat_tables([query.output_schema.empty_table(), *results])
    _write(out, args.out)
    _summary(inputs, out, args.out, started, sum(query.merge.dropped))
    return 0


def _read(input_id: int, path: str, args: argparse.Namespace) -> pa.Table:
    """Read one input, checking its event times file by file (errors name input and file)."""
    try:
        return read_input(path, args.format, ts_column=args.timestamp)
    except InputError as exc:
        raise InputError(f"input {input_id} ({path}): {exc}") from exc


def _write(out: pa.Table, path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(out, path)


def _summary(inputs: list[pa.Table], out: pa.Table, path: str, started: float,
             dropped: int) -> None:
    seconds = time.perf_counter() - started
    n_in = sum(t.num_rows for t in inputs)
    note = f", {dropped} out-of-order rows dropped" if dropped else ""
    print(f"{n_in} input rows from {len(inputs)} inputs -> {out.num_rows} window rows in "
          f"{path} ({seconds:.2f} s{note})")


def _run_on_executor(args: argparse.Namespace, inputs: list[pa.Table], schema: pa.Schema,
                     spec: WindowSpec) -> tuple[pa.Table, int]:
    """S-Merge the inputs, then run ``[where ->] windows`` on the executor under a strategy."""
    from spark_stream_sched.runtime.executor.engine import Engine
    from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan
    from spark_stream_sched.runtime.predicate import Predicate

    merge = SMerge(len(inputs), args.timestamp, args.out_of_order)
    for i, table in enumerate(inputs):
        try:
            merge.push(i, table.cast(schema))
        except OutOfOrderError as exc:
            raise InputError(f"{args.input[i]}: {exc}") from exc
        merge.finish(i)
    merged = merge.pop_ready()
    ops, source = [], "merged"
    if args.where:
        Predicate.compile(args.where, merged.schema)  # a bad predicate fails before any work
        ops.append(OperatorDef("where", OperatorKind.FILTER, (source,),
                               params={"predicate": args.where}))
        source = "where"
    ops.append(OperatorDef("windows", OperatorKind.WINDOW_AGGREGATE, (source,), params={
        "size": spec.size_ms, "slide": spec.slide_ms, "keys": list(args.key),
        "aggregates": list(args.agg), "ts": args.timestamp}))
    engine = Engine(QueryPlan(ops), args.scheduler or "fifo", workers=args.workers,
                    ts_column=args.timestamp)
    result = engine.run({"merged": merged})
    return result.outputs["windows"], sum(merge.dropped)


def _common_schema(inputs: list[pa.Table], paths: list[str]) -> pa.Schema:
    schema = inputs[0].schema
    for table, path in zip(inputs[1:], paths[1:], strict=True):
        if table.num_rows and set(table.schema.names) != set(schema.names):
            raise InputError(f"input {path} has columns {table.schema.names}, but input "
                             f"{paths[0]} has {schema.names}; all inputs need the same columns")
    non_empty = [t.schema for t in inputs if t.num_rows]
    return pa.unify_schemas(non_empty, promote_options="permissive") if non_empty else schema
