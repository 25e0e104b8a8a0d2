"""``spark-stream-sched aggregate``: ordered window aggregation over files, no Spark needed.

Each ``--input`` is one input stream, listed and read by the input layer (``inputs/``) exactly as
the Spark source reads it: a directory (its visible files in name order), a glob (matches in path
order) or a single file, every file parsed with one schema inferred from the first file that holds
a row. The command reads a **static snapshot**: the files listed when it starts; a file added
while it runs belongs to the next run. The inputs are pushed into the runtime packet by packet,
round-robin, as a streaming source would deliver them, and the closed windows are written to
``--out`` (its suffix picks Parquet, CSV or JSON lines; ``-`` writes CSV to standard output).
Output columns: ``window_start``, ``window_end`` (int64 ms), the key
columns, the aggregate aliases.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.csv as pa_csv

from spark_stream_sched.errors import ConfigError, InputError, OutOfOrderError
from spark_stream_sched.inputs import FORMAT_NAMES, FORMATS, FileFormat, read_inputs
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.packets import default_packet_rows, iter_packets, row_bytes
from spark_stream_sched.runtime.query import QuerySpec
from spark_stream_sched.runtime.query.names import one_name, split_list, split_names

T = TypeVar("T")


def register(sub: Any) -> None:
    """Add the ``aggregate`` sub-command to ``sub``."""
    p = sub.add_parser("aggregate", help="windowed aggregation over sorted input files",
                       description=__doc__.splitlines()[0])
    p.add_argument("--input", action="append", required=True, metavar="PATH",
                   help="one input stream (directory or file); repeat for each input")
    p.add_argument("--format", choices=FORMAT_NAMES, default="parquet",
                   help="input file format (json is an alias of jsonl; default: parquet)")
    p.add_argument("--timestamp", default="ts", metavar="COL",
                   help="event-time column: int64 ms or a timestamp (default: ts)")
    p.add_argument("--key", action="append", default=[], metavar="COL",
                   help="group-by column; repeat for several")
    p.add_argument("--window", required=True,
                   help="window size as a Spark interval, e.g. '30 seconds', 30s, '1 minute' "
                        "(a bare number is refused)")
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
    p.add_argument("--out", required=True, metavar="FILE",
                   help="result file; its suffix picks the format (.parquet, .csv, .jsonl); "
                        "- writes CSV to standard output")
    p.set_defaults(func=run)


def query_spec(args: argparse.Namespace) -> QuerySpec:
    """The query the flags describe (the same spec Spark options or a TOML config give).

    Errors name the flag (``--window '30': ... has no unit ...``).
    """
    window = _flag("--window", args.window, lambda t: parse_duration(t, "value"))
    slide = _flag("--slide", args.slide, lambda t: parse_duration(t, "value")) if (
        args.slide) else window
    return _flag("", None, lambda _: QuerySpec(
        n_inputs=len(args.input), window_ms=window, slide_ms=slide,
        aggregates=split_list(args.agg),
        timestamp_column=one_name("--timestamp", args.timestamp),
        key_columns=split_names("--key", args.key), out_of_order=args.out_of_order,
        where=(args.where or "").strip() or None))


def _flag(flag: str, text: str | None, parse: Callable[[Any], T]) -> T:
    """``parse(text)`` with a ConfigError prefixed by ``flag 'text':``."""
    try:
        return parse(text)
    except ConfigError as exc:
        if not flag:
            raise
        raise ConfigError(f"{flag} {text!r}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Run the aggregation described by ``args``; print a one-line summary."""
    output_format(args.out)  # an unknown suffix fails before any work
    spec = query_spec(args)
    started = time.perf_counter()
    inputs = read_inputs(args.input, args.format, ts_column=args.timestamp)
    schema = inputs[0].schema
    query = spec.build(schema)
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


def output_format(path: str) -> FileFormat | None:
    """The format ``--out`` names by its suffix; None for ``-`` (CSV on standard output).

    Raises
    ------
    ConfigError
        An unknown suffix, listing the accepted ones.
    """
    if path == "-":
        return None
    suffix = Path(path).suffix.lower()
    for fmt in FORMATS.values():
        if suffix in fmt.suffixes:
            return fmt
    known = ", ".join(s for f in FORMATS.values() for s in f.suffixes)
    raise ConfigError(f"--out {path!r}: the suffix {suffix or '(none)'!r} names no output "
                      f"format; use one of {known}, or - for CSV on standard output")


def _write(out: pa.Table, path: str) -> None:
    fmt = output_format(path)
    if fmt is None:
        sink = pa.BufferOutputStream()
        pa_csv.write_csv(out, sink)
        sys.stdout.write(sink.getvalue().to_pybytes().decode())
        sys.stdout.flush()
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fmt.write(out, Path(path), None)


def _summary(inputs: list[pa.Table], out: pa.Table, path: str, started: float,
             dropped: int) -> None:
    seconds = time.perf_counter() - started
    n_in = sum(t.num_rows for t in inputs)
    note = f", {dropped} out-of-order rows dropped" if dropped else ""
    where = "standard output" if path == "-" else path
    print(f"{n_in} input rows from {len(inputs)} inputs -> {out.num_rows} window rows in "
          f"{where} ({seconds:.2f} s{note})", file=sys.stderr if path == "-" else sys.stdout)


def _run_on_executor(args: argparse.Namespace, inputs: list[pa.Table], schema: pa.Schema,
                     spec: QuerySpec) -> tuple[pa.Table, int]:
    """S-Merge the inputs, then run ``[where ->] windows`` on the executor under a strategy."""
    from spark_stream_sched.runtime.executor.engine import Engine
    from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan
    from spark_stream_sched.runtime.predicate import Predicate

    merge = SMerge(spec.n_inputs, spec.timestamp_column, spec.out_of_order)
    for i, table in enumerate(inputs):
        try:
            merge.push(i, table.cast(schema))
        except OutOfOrderError as exc:
            raise InputError(f"{args.input[i]}: {exc}") from exc
        merge.finish(i)
    merged = merge.pop_ready()
    ops, source = [], "merged"
    if spec.where is not None:
        Predicate.compile(spec.where, merged.schema)  # a bad predicate fails before any work
        ops.append(OperatorDef("where", OperatorKind.FILTER, (source,),
                               params={"predicate": spec.where}))
        source = "where"
    ops.append(OperatorDef("windows", OperatorKind.WINDOW_AGGREGATE, (source,), params={
        "size": spec.window_ms, "slide": spec.slide_ms, "keys": list(spec.key_columns),
        "aggregates": list(spec.aggregates), "ts": spec.timestamp_column}))
    engine = Engine(QueryPlan(ops), args.scheduler or "fifo", workers=args.workers,
                    ts_column=spec.timestamp_column)
    result = engine.run({"merged": merged})
    return result.outputs["windows"], sum(merge.dropped)

