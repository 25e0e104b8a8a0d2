"""``spark-stream-sched aggregate``: ordered window aggregation over files, no Spark needed.

Each ``--input`` is one input stream, listed and read by the input layer (``inputs/``) exactly as
the Spark source reads it: a directory (its visible files in name order), a glob (matches in path
order) or a single file, every file parsed with one schema inferred from the first file that holds
a row. The command reads a **static snapshot**: the files listed when it starts; a file added
while it runs belongs to the next run. The inputs are pushed into the runtime packet by packet,
round-robin, as a streaming source would deliver them; on the threaded executor (``--where``,
``--scheduler``, ``--workers``) they are *read* that way too (a Parquet row group or a CSV/JSON
file at a time, S-Merged as read) and fed to the running plan with at most ``--read-ahead``
untaken packets, so the strategy decides what stays queued. The closed windows are written to
``--out`` (its suffix picks Parquet, CSV or JSON lines; ``-`` writes CSV to standard output).
Output columns: ``window_start``, ``window_end`` (int64 ms), the key
columns, the aggregate aliases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, FormatMismatchError, OutOfOrderError
from spark_stream_sched.inputs import (
    FORMAT_NAMES,
    FORMATS,
    FileFormat,
    InputStream,
    about_input,
    canonical_format,
    count_rows,
    list_finished_files,
    locate,
    read_file_rows,
    read_inputs,
    resolve_schema,
)
from spark_stream_sched.inputs.formats import write_csv
from spark_stream_sched.inputs.snapshot import SNAPSHOT_HINT
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.merge import SMerge
from spark_stream_sched.runtime.names import one_name, split_list, split_names
from spark_stream_sched.runtime.packets import (
    INPUT_COL,
    SEQ_COL,
    default_packet_rows,
    event_times,
    iter_packets,
    row_bytes,
)
from spark_stream_sched.runtime.query import OrderedAggregation, QuerySpec

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
    p.add_argument("--op", action="append", default=[], metavar="STAGE",
                   help="keyed operator applied per --key before the window, in order, e.g. "
                        "'delta(kwh) as used', 'sessionize(5 minutes)', "
                        "'dedup(url, within=10 minutes)'; repeat for a pipeline")
    p.add_argument("--window",
                   help="window size as a Spark interval, e.g. '30 seconds', 30s, '1 minute' "
                        "(a bare number is refused); optional when --op gives the result")
    p.add_argument("--slide", help="window slide, e.g. 3s (default: the size, tumbling)")
    p.add_argument("--agg", action="append", default=[], metavar="EXPR",
                   help="aggregate, e.g. \"count(*) as n\"; repeat for several")
    p.add_argument("--out-of-order", choices=["fail", "drop"], default="fail")
    p.add_argument("--where", metavar="PRED",
                   help="keep only tuples matching this predicate before the windows, e.g. "
                        "\"kind = 'reading'\"; runs the plan on the threaded executor")
    p.add_argument("--scheduler", metavar="NAME",
                   help="run the plan (S-Merge -> [where] -> windows) on the threaded executor "
                        "under this scheduling strategy, e.g. fifo, chain, path_capacity; "
                        "with --op one of ct, lp, et, qst (Prasaad et al. 2018, §6) picks which "
                        "keyed operator a free worker serves; the result is the same for every "
                        "one")
    p.add_argument("--workers", type=int, default=1, help="executor worker threads (default 1); "
                   "with --op the keyed operators run on this many threads (hybrid queue)")
    p.add_argument("--queue", choices=("hybrid", "partitioned"), default="hybrid",
                   help="with --op and --workers/--scheduler: the keyed operators' work queue, "
                        "Prasaad et al. (2018), fig. 7 (hybrid, default) or §4.2 (partitioned)")
    p.add_argument("--read-ahead", type=int, default=None, metavar="N",
                   help="executor: read an input packet only while fewer than N wait "
                        "unprocessed (default 4)")
    p.add_argument("--metrics", metavar="FILE",
                   help="executor: write the run's metrics summary (latency, peak queue "
                        "bytes, ...) as JSON to FILE")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="result file; its suffix picks the format (.parquet, .csv, .jsonl); "
                        "- writes CSV to standard output")
    p.set_defaults(func=run)


def query_spec(args: argparse.Namespace) -> QuerySpec:
    """The query the flags describe (the same spec Spark options or a TOML config give).

    Errors name the flag (``--window '30': ... has no unit ...``).
    """
    if args.window is None and not args.op:
        raise ConfigError("--window is required (or --op operators that give the result, "
                          "e.g. --op 'sessionize(5 minutes)')")
    window = 0 if args.window is None else _flag(
        "--window", args.window, lambda t: parse_duration(t, "value"))
    slide = _flag("--slide", args.slide, lambda t: parse_duration(t, "value")) if (
        args.slide and args.window is not None) else window
    return _flag("", None, lambda _: QuerySpec(
        n_inputs=len(args.input), window_ms=window, slide_ms=slide,
        aggregates=split_list(args.agg),
        timestamp_column=one_name("--timestamp", args.timestamp),
        key_columns=split_names("--key", args.key), out_of_order=args.out_of_order,
        where=(args.where or "").strip() or None, operators=tuple(args.op)))


def _flag(flag: str, text: str | None, parse: Callable[[Any], T]) -> T:
    """``parse(text)`` with a ConfigError prefixed by ``flag 'text':``."""
    try:
        return parse(text)
    except ConfigError as exc:
        if not flag:
            raise
        raise ConfigError(f"{flag} {text!r}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Run the aggregation described by ``args``; print a one-line summary.

    Errors that tell how to fix them with an option say it with this command's flags.
    """
    try:
        return _run(args)
    except (OutOfOrderError, FormatMismatchError) as exc:
        raise exc.for_flag() from None


def _run(args: argparse.Namespace) -> int:
    output_format(args.out)  # an unknown suffix fails before any work
    spec = query_spec(args)
    if args.read_ahead is not None and args.read_ahead < 1:
        raise ConfigError(f"--read-ahead must be >= 1, got {args.read_ahead}")
    started = time.perf_counter()
    if spec.operators and (args.scheduler or args.workers != 1):
        schema = resolve_schema([str(p) for p in args.input], args.format, None, SNAPSHOT_HINT)
        spec.build(schema)  # a bad query fails before any work
        out, dropped, n_in = _run_keyed_parallel(args, schema, spec)
        _write(out, args.out)
        _summary(n_in, len(args.input), out, args.out, started, dropped)
        return 0
    if not spec.operators and (args.where or args.scheduler or args.workers != 1):
        schema = resolve_schema([str(p) for p in args.input], args.format, None, SNAPSHOT_HINT)
        spec.build(schema)  # a bad query fails before any work
        out, dropped, n_in = _run_on_executor(args, schema, spec)
        _write(out, args.out)
        _summary(n_in, len(args.input), out, args.out, started, dropped)
        return 0
    inputs = read_inputs(args.input, args.format, ts_column=args.timestamp)
    schema = inputs[0].schema
    query = spec.build(schema)
    rows = default_packet_rows(row_bytes(schema))
    streams = [iter(iter_packets(t.cast(schema), rows)) for t in inputs]
    results = [query.poll() for _ in _rounds(streams, query, args.input, args.format)]
    out = pa.concat_tables([query.output_schema.empty_table(), *results])
    _write(out, args.out)
    _summary(sum(t.num_rows for t in inputs), len(inputs), out, args.out, started,
             sum(query.merge.dropped))
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
        write_csv(out, sink)  # the bytes a .csv file gets
        sys.stdout.write(sink.getvalue().to_pybytes().decode())
        sys.stdout.flush()
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fmt.write(out, Path(path), None)


def _summary(n_in: int, n_inputs: int, out: pa.Table, path: str, started: float,
             dropped: int) -> None:
    seconds = time.perf_counter() - started
    note = f", {dropped} out-of-order rows dropped" if dropped else ""
    where = "standard output" if path == "-" else path
    print(f"{n_in} input rows from {n_inputs} inputs -> {out.num_rows} result rows in "
          f"{where} ({seconds:.2f} s{note})", file=sys.stderr if path == "-" else sys.stdout)


def _run_on_executor(args: argparse.Namespace, schema: pa.Schema,
                     spec: QuerySpec) -> tuple[pa.Table, int, int]:
    """Run ``S-Merge -> [where ->] windows`` on the executor, feeding packets as they are read.

    Returns the windows, the dropped out-of-order rows and the input rows read.
    """
    from spark_stream_sched.runtime.executor.engine import Engine
    from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan
    from spark_stream_sched.runtime.predicate import Predicate

    merge = SMerge(spec.n_inputs, spec.timestamp_column, spec.out_of_order)
    merge.schema = schema  # every chunk is conformed to it; fixes the output schema up front
    ops, source = [], "merged"
    if spec.where is not None:
        Predicate.compile(spec.where, merge.output_schema())  # fails before any work
        ops.append(OperatorDef("where", OperatorKind.FILTER, (source,),
                               params={"predicate": spec.where}))
        source = "where"
    ops.append(OperatorDef("windows", OperatorKind.WINDOW_AGGREGATE, (source,), params={
        "size": spec.window_ms, "slide": spec.slide_ms, "keys": list(spec.key_columns),
        "aggregates": list(spec.aggregates), "ts": spec.timestamp_column}))
    engine = Engine(QueryPlan(ops), args.scheduler or "fifo", workers=args.workers,
                    ts_column=spec.timestamp_column)
    counts = [0] * spec.n_inputs
    result = engine.run({"merged": _merged_packets(args, schema, merge, counts)},
                        read_ahead=args.read_ahead or 4)
    if args.metrics:
        Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(args.metrics).write_text(json.dumps(result.metrics.summary(), indent=1) + "\n")
    return result.outputs["windows"], sum(merge.dropped), sum(counts)


def _run_keyed_parallel(args: argparse.Namespace, schema: pa.Schema,
                        spec: QuerySpec) -> tuple[pa.Table, int, int]:
    """``S-Merge -> [where] -> keyed operators`` on a KeyedPipeline, then windows sequentially.

    Every ``--op`` is one keyed stage (100 partitions of ``--key``, one operator per partition,
    Prasaad et al. (2018), §4); the S-Merged packets are fed as they are read, with their ready
    bounds. The output equals the single-threaded path's (same rows, same order). Returns the result
    rows, the dropped out-of-order rows and the input rows read.
    """
    from spark_stream_sched.runtime.executor.keyed_parallel import (
        HEURISTICS,
        Keyed,
        KeyedPipeline,
        Stateless,
    )
    from spark_stream_sched.runtime.keyed.base import build_operator, operator_class
    from spark_stream_sched.runtime.keyed.pipeline import parse_stages, with_internal_columns
    from spark_stream_sched.runtime.predicate import Predicate
    from spark_stream_sched.runtime.window.aggregator import WindowAggregator

    heuristic = (args.scheduler or "lp").lower()
    if heuristic not in HEURISTICS:
        raise ConfigError(f"--scheduler {args.scheduler!r}: with --op the keyed operators run "
                          f"on the multicore scheduler; use one of {', '.join(HEURISTICS)}")
    if args.workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {args.workers}")
    merge = SMerge(spec.n_inputs, spec.timestamp_column, spec.out_of_order)
    merge.schema = schema
    stages: list[Stateless | Keyed] = []
    if spec.where is not None:
        where = Predicate.compile(spec.where, merge.output_schema())
        stages.append(Stateless("where", lambda t: t.filter(pa.array(where.evaluate(t)))))
    current, keys = with_internal_columns(merge.output_schema()), list(spec.key_columns)
    for stage in parse_stages(spec.operators):
        aggs = () if operator_class(stage.name).emits_rows else spec.aggregates
        make = partial(build_operator, stage, current, keys, spec.timestamp_column, aggs)
        stages.append(Keyed(stage.text(), _per_partition(make), tuple(keys),
                            100 if keys else 1))
        current = make().output_schema
    counts = [0] * spec.n_inputs
    pipe = KeyedPipeline(stages, workers=args.workers, queue=args.queue, heuristic=heuristic)
    run = pipe.run(_bounded_packets(args, schema, merge, counts))
    outputs = list(zip(run.outputs, run.bounds, strict=True))
    if spec.window is not None:
        window = WindowAggregator(spec.window, keys, list(spec.aggregates),
                                  spec.timestamp_column, current)
        outputs = [(window.update(t, b), b) for t, b in outputs] + [(window.finish(), None)]
        current = window.output_schema
    out = pa.concat_tables([current.empty_table(), *(t for t, _ in outputs)])
    return out.drop_columns([n for n in (INPUT_COL, SEQ_COL) if n in out.column_names]), \
        sum(merge.dropped), sum(counts)


def _merged_packets(args: argparse.Namespace, schema: pa.Schema, merge: SMerge,
                    counts: list[int]) -> Iterator[pa.Table]:
    """Packets of the S-Merged inputs, read chunk by chunk round-robin (``counts``: rows read).

    Yields at least one (possibly empty) packet, so that the executor knows the schema.
    """
    for packet, _ in _bounded_packets(args, schema, merge, counts):
        yield packet


def _per_partition(make: Callable[[], T]) -> Callable[[int], T]:
    """A ``Keyed.factory``: every partition gets a fresh ``make()``."""
    return lambda partition: make()


def _bounded_packets(args: argparse.Namespace, schema: pa.Schema, merge: SMerge,
                     counts: list[int]) -> Iterator[tuple[pa.Table, int | None]]:
    """:func:`_merged_packets` with each packet's ready bound.

    A round's released rows are cut into packets; the last one carries the round's ready bound
    (``None`` once every input finished: the end follows), the others the previous round's
    (every tuple below it was given before), so bounds never decrease.
    """
    rows = default_packet_rows(row_bytes(merge.output_schema()))
    readers = [_file_chunks(str(p), i, args.format, schema, args.timestamp)
               for i, p in enumerate(args.input)]
    emitted, previous = False, None
    for _ in _rounds(readers, merge, args.input, args.format, counts):
        ready = merge.pop_ready()
        bound = None if merge.all_finished else merge.ready_bound
        for lo in range(0, ready.num_rows, rows):
            emitted = True
            yield ready.slice(lo, rows), bound if lo + rows >= ready.num_rows else previous
        previous = bound if bound is not None else previous
    if not emitted:
        yield merge.output_schema().empty_table(), None


def _rounds(sources: list[Iterator[pa.Table]], target: SMerge | OrderedAggregation,
            names: list[str], fmt: str, counts: list[int] | None = None) -> Iterator[None]:
    """Push the next packet of every live input into ``target``, round-robin; yield per round.

    An exhausted input is finished; ``counts`` (if given) adds up the rows pushed per input;
    an out-of-order row is an OutOfOrderError naming the input as given (``names``), the file
    and the row in it.
    """
    live = list(range(len(sources)))
    while live:
        for i in list(live):
            packet = next(sources[i], None)
            if packet is None:
                target.finish(i)
                live.remove(i)
                continue
            if counts is not None:
                counts[i] += packet.num_rows
            try:
                target.push(i, packet)
            except OutOfOrderError as exc:
                raise locate(exc, InputStream(i, str(names[i]), fmt, None)) from None
        yield


def _file_chunks(path: str, index: int, fmt: str, schema: pa.Schema,
                 ts_column: str) -> Iterator[pa.Table]:
    """One input's rows in stream order, a Parquet row group or a CSV/JSON file at a time.

    Rows are conformed and their event times checked as
    :func:`~spark_stream_sched.inputs.read_inputs` does (same errors, naming input and file).
    """
    with about_input(index, path):
        for file in list_finished_files(path):
            for lo, hi in _row_ranges(file, canonical_format(fmt)):
                part = read_file_rows(file, fmt, schema, lo, hi)
                event_times(part, ts_column, f"file {file}", first_row=lo)
                yield part


def _row_ranges(file: str, fmt: str) -> list[tuple[int, int]]:
    n = count_rows(file, fmt)
    if fmt != "parquet" or n == 0:
        return [(0, n)]
    meta = pq.ParquetFile(file).metadata
    bounds = [0]
    for i in range(meta.num_row_groups):
        bounds.append(bounds[-1] + meta.row_group(i).num_rows)
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if hi > lo]

