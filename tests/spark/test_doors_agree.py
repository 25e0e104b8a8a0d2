"""The doors agree: the source, the batch read and the sink give the oracle's rows, in order.

For random inputs (ties, nulls, a hot key), random query shapes -- windows, keyed row
operators, sessions, a join that spills to disk followed by a window -- random batchings and
partition counts, every door runs the engine's one batch entry, in-process as Spark's runners
would call it (no JVM):

* the source (``OrderedAggStreamReader``: offsets, the driver's split, each task's ``read()``,
  ``commit``): each micro-batch's rows over all its tasks, in the query's order, then the next
  batch's -- the one sequence the source promises for any batch size;
* the batch read (``OrderedAggBatchReader``): the same rows as a set;
* the sink (``OrderedAggStreamWriter``: write tasks over shuffled rows, the commit, then
  ``finish_sink``): its part files, in commit order, the same sequence.

All equal :func:`~spark_stream_sched.testing.pipeline_reference.reference_pipeline`. The
``ordered()`` transformation runs inside Spark's own stateful operator: ``test_transform.py``
and ``test_sink.py`` run the same aggregates (``max_by``/``min_by`` over tied orders too)
through a real Spark session.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.inputs import write_input
from spark_stream_sched.runtime.distribution.groups import group_of_rows
from spark_stream_sched.runtime.engine.order import output_order
from spark_stream_sched.runtime.query import QuerySpec, spec_from_options
from spark_stream_sched.spark import sink
from spark_stream_sched.spark.batch import OrderedAggBatchReader
from spark_stream_sched.spark.datasource import OrderedAggDataSource
from spark_stream_sched.testing.pipeline_reference import reference_pipeline

from ..runtime.strategies import SCHEMA, input_stream
from .helpers import drive_batches
from .test_sink import FakeTasks

#: Query shapes: options shared by the source and the sink (N: the number of inputs).
SHAPES: dict[str, dict[str, str]] = {
    "window": {"window": "3 seconds", "slide": "1 second",
               "aggregates": "count(*) as n, first(v) as fv, last(s) as ls, min(i) as lo, "
                             "max_by(s, i) as mb, min_by(v, i) as nb"},
    "rows": {"operators": "delta(v) as dv; running(count(*) as rn, max(i) as mi, "
                          "max_by(s, i) as ms)"},
    "sessions": {"operators": "dedup(s, within=1 seconds); sessionize(1500 milliseconds)",
                 "aggregates": "count(*) as n, first(v) as fv, min_by(s, i) as ns"},
    "spilling_join": {"operators": "join(N, within=2 seconds, budget=0)", "window": "3 seconds",
                      "slide": "1 second", "aggregates": "count(*) as n, first(v_0) as fv"},
}


def options(shape: str, n_inputs: int, groups: int) -> dict[str, str]:
    opts = {k: v.replace("join(N", f"join({max(n_inputs, 2)}") for k, v in SHAPES[shape].items()}
    return {**opts, "keyColumns": "k", "partitionGroups": str(groups)}


def spec_of(opts: dict[str, str], n_inputs: int) -> QuerySpec:
    return spec_from_options({k: v for k, v in opts.items()
                              if k not in ("numPartitions", "maxRecordsPerTrigger")}, n_inputs)


def comparable(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows as tuples of (name, value); NaN equal to NaN."""
    def value(v: Any) -> Any:
        return ("nan",) if isinstance(v, float) and math.isnan(v) else v
    return [tuple((k, value(v)) for k, v in sorted(r.items())) for r in rows]


def in_order(rows: list[dict[str, Any]], spec: QuerySpec) -> list[dict[str, Any]]:
    """``rows`` of one batch (spread over tasks) in the query's order; nulls first."""
    names = output_order(spec)
    if not rows or any(n not in rows[0] for n in names):  # row results: the sequence of tasks
        return rows
    table = pa.Table.from_pylist(rows)
    keys = [(n, "ascending", "at_start") for n in names]
    return table.take(pa.compute.sort_indices(table, sort_keys=keys)).to_pylist()


# -- the doors -------------------------------------------------------------------------------


def write_files(tables: list[pa.Table], root: Path, files: int) -> str:
    for j, table in enumerate(tables):
        write_input(table, str(root / f"in{j}"), "parquet", max(1, files), 7)
    return ",".join(str(root / f"in{j}") for j in range(len(tables)))


def run_source(opts: dict[str, str], spec: QuerySpec, limit: int) -> list[dict[str, Any]]:
    source = OrderedAggDataSource(opts)
    reader = source.streamReader(source.schema())
    out: list[dict[str, Any]] = []
    recording = _Recording(reader, out, spec)
    _, planned = drive_batches(recording, limit)
    out += in_order(recording.pending, spec)  # Spark never commits the last batch to the source
    assert planned or not out
    return out


class _Recording:
    """A stream reader whose ``read()`` results are collected per batch, in the query's order."""

    def __init__(self, reader: Any, out: list[dict[str, Any]], spec: QuerySpec) -> None:
        self.reader, self.out, self.spec = reader, out, spec
        self.pending: list[dict[str, Any]] = []  # the rows of the batch not yet committed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)

    def read(self, partition: Any) -> Any:
        batches = list(self.reader.read(partition))
        self.pending += [r for b in batches for r in b.to_pylist()]
        return iter(batches)

    def commit(self, end: Any) -> None:
        self.out += in_order(self.pending, self.spec)
        self.pending = []
        self.reader.commit(end)


def run_batch_read(opts: dict[str, str]) -> list[dict[str, Any]]:
    source = OrderedAggDataSource({k: v for k, v in opts.items() if k != "stateLocation"})
    schema = source.schema()
    reader = source.reader(schema)
    assert isinstance(reader, OrderedAggBatchReader)
    return [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]


def run_sink(tables: list[pa.Table], opts: dict[str, str], root: Path, cuts: list[list[int]],
             tasks: int, seed: int, monkeypatch: pytest.MonkeyPatch,
             by_group: bool = False) -> list[dict[str, Any]]:
    """The sink's part files, in commit order, as rows.

    Each batch's rows reach ``tasks`` write tasks shuffled at random, or, ``by_group``, split
    by partition group as ``partition_for_sink`` does (each group in one task, which then
    runs it itself instead of the driver).
    """
    rng = np.random.default_rng(seed)
    bounds = [[0, *sorted(c), t.num_rows] for c, t in zip(cuts, tables, strict=True)]

    def batches() -> Iterator[list[pa.Table]]:
        for b in range(len(bounds[0]) - 1):
            rows = pa.concat_tables([
                t.slice(lo, hi - lo).append_column("input", pa.array([j] * (hi - lo), pa.int32()))
                .append_column("pos", pa.array(np.arange(lo, hi), pa.int64()))
                for j, (t, (lo, hi)) in enumerate(zip(
                    tables, [(c[b], c[b + 1]) for c in bounds], strict=True))])
            if by_group:
                yield split_by_group(rows, int(opts["partitionGroups"]), tasks)
            else:
                order = rng.permutation(rows.num_rows)
                yield [rows.take(pa.array(p, pa.int64())) for p in np.array_split(order, tasks)]

    files = drive_sink({**opts, "inputs": str(len(tables))}, root, batches(), monkeypatch)
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def split_by_group(rows: pa.Table, groups: int, tasks: int) -> list[pa.Table]:
    """``rows`` over ``tasks`` write tasks by partition group of key ``k`` (each group in one)."""
    task = np.asarray(group_of_rows(rows, ["k"], groups)) % tasks
    return [rows.filter(pa.array(task == t)) for t in range(tasks)]


def drive_sink(opts: dict[str, str], root: Path, batches: Iterable[list[pa.Table]],
               monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Commit each batch's task parts to an ``ordered-agg`` sink under ``root``, finish it.

    The rows carry ``input`` and ``pos`` (the sequence). Returns the part files, in commit order.
    """
    sink_opts = {**opts, "path": str(root / "out"), "checkpointLocation": str(root / "ck"),
                 "inputColumn": "input", "sequenceColumn": "pos"}
    writer = sink.OrderedAggStreamWriter(sink.parse_sink_options(sink_opts))
    fake = FakeTasks(monkeypatch, writer)
    for b, parts in enumerate(batches):
        writer.commit(fake.write(b, parts), b)
    sink.finish_sink(sink_opts)
    return sorted((root / "out").glob("part-*.parquet"))


# -- the property ------------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[pa.Table], list[list[int]], str, int, int, int, int]:
    tables = draw(st.lists(input_stream(max_rows=30), min_size=1, max_size=3))
    shape = draw(st.sampled_from(sorted(SHAPES)))
    if shape == "spilling_join" and len(tables) < 2:
        tables.append(draw(input_stream(max_rows=30)))
    n_batches = draw(st.integers(1, 4))
    cuts = [sorted(draw(st.lists(st.integers(0, t.num_rows), min_size=n_batches - 1,
                                 max_size=n_batches - 1))) for t in tables]
    return (tables, cuts, shape, draw(st.sampled_from([1, 4, 16])), draw(st.integers(1, 3)),
            draw(st.sampled_from([7, 25, 0])), draw(st.integers(0, 10_000)))


# 100 examples take 37-45 s here; at 30 a run drew the sink's window-order defect after a
# spilling join (fixed, see the test below) only now and then (2,000 examples pass now)
@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(cases(), st.booleans(), st.sampled_from(["driver", "tasks"]))
def test_the_source_the_batch_read_and_the_sink_agree_with_the_oracle(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        case: tuple[list[pa.Table], list[list[int]], str, int, int, int, int],
        by_group: bool, split_rows: str) -> None:
    tables, cuts, shape, groups, tasks, limit, seed = case
    tables = [t.cast(SCHEMA) for t in tables]
    root = tmp_path_factory.mktemp("doors")
    opts = options(shape, len(tables), groups)
    spec = spec_of(opts, len(tables))
    want = comparable(reference_pipeline(tables, spec))
    source_opts = {**opts, "inputs": write_files(tables, root, 2), "format": "parquet",
                   "timestampColumn": "ts", "stateLocation": str(root / "state"),
                   "endOfInput": "availableNow", "numPartitions": str(tasks),
                   "maxRecordsPerTrigger": str(limit), "splitRows": split_rows,
                   "schema": "ts bigint, k string, g bigint, v double, i bigint, s string"}
    # windows and sessions: one sequence; rows: Spark keeps no order across a batch's tasks
    as_sequence = shape in ("window", "sessions", "spilling_join")

    def same(rows: list[dict[str, Any]]) -> bool:
        got = comparable(rows)
        return got == want if as_sequence else sorted(got, key=repr) == sorted(want, key=repr)

    assert same(run_source(source_opts, spec, limit or 10**9))
    assert sorted(comparable(run_batch_read(source_opts)), key=repr) == sorted(want, key=repr)
    assert same(run_sink(tables, opts, root, cuts, tasks, seed, monkeypatch, by_group))
    split = root / "state" / "batches"  # the driver's split rows are pruned (tasks: none)
    assert os.listdir(split) == [] if split_rows == "driver" else not split.exists()


def join_stream(rng: np.random.Generator, n: int) -> pa.Table:
    """``n`` rows over one minute, 20 keys: enough matches for a 3-way join to spill at 4k."""
    return pa.table({"ts": pa.array(np.sort(rng.integers(0, 60_000, n)), pa.int64()),
                     "k": pa.array([f"m{k}" for k in rng.integers(0, 20, n)]),
                     "g": pa.array(np.zeros(n, np.int64)), "v": pa.array(rng.random(n)),
                     "i": pa.array(np.zeros(n, np.int64)), "s": pa.array(["x"] * n)},
                    schema=SCHEMA)


@pytest.mark.slow
def test_a_spilling_join_keeps_one_sequence_through_every_door(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reported case, scaled down: 3 inputs, a join that spills at once, windows after it,
    small micro-batches over 2 tasks. Groups held back independently, so concatenated batches
    had windows earlier than ones already emitted; every door must give the oracle's order.

    At this size (3 x 1,000 rows, batches of 400 rows at the source, 100 per input at the
    sink) both doors give windows out of order when the query's hold is replaced by none
    (checked by patching ``query_hold`` away in the source and the sink's tasks)."""
    rng = np.random.default_rng(1)
    tables = [join_stream(rng, 1000) for _ in range(3)]
    opts = {"operators": "join(3, within=10 seconds, budget=4k)", "window": "1 second",
            "aggregates": "count(*) as n, first(v_0) as f", "keyColumns": "k",
            "partitionGroups": "8"}
    spec = spec_of(opts, 3)
    want = comparable(reference_pipeline(tables, spec))
    source_opts = {**opts, "inputs": write_files(tables, tmp_path, 3),
                   "stateLocation": str(tmp_path / "state"), "endOfInput": "availableNow",
                   "numPartitions": "2", "maxRecordsPerTrigger": "400"}
    assert comparable(run_source(source_opts, spec, 400)) == want
    cuts = [list(range(100, 1000, 100)) for _ in tables]
    assert comparable(run_sink(tables, opts, tmp_path, cuts, 2, 0, monkeypatch)) == want


def test_the_sinks_first_batch_releases_nothing_past_a_spilling_join(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the property above: in the sink's first batch a task pushed a group's join
    state at its own bound while the driver ran another group to ``R`` with no hold; the next
    batch's query hold then sent that group's window bound back (InputError "ready bound went
    back from 67 to 1" in the case Hypothesis shrank to). The first batch now releases
    nothing."""
    def stream(ts: list[int], keys: list[str | None], g: list[int]) -> pa.Table:
        n = len(ts)
        return pa.table({"ts": ts, "k": keys, "g": g, "v": [None] * n, "i": [None] * n,
                         "s": [None] * n}).cast(SCHEMA)

    tables = [
        stream([68, 318, 3318, 3318, 3568, 6568, 6575, 6582, 6589, 7589, 8589, 8589, 8590, 8597,
                8847, 11847, 12847, 13846, 13846, 13847, 13848, 13855, 14105, 14105, 14355,
                17355],
               ["k2", None, "hot", "hot", "hot", "hot", "k2", "k2", "hot", "k0", "k3", "hot",
                "k1", "hot", "hot", "hot", "hot", "hot", "k1", "k1", "hot", "k2", "k3", "hot",
                "k1", "k1"],
               [1, 2, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 0, 0, 1, 0, 2, 2, 0, 0, 1]),
        stream([-265, -265, -264, -264, -14, -14, -14, -14, 236, 486, 487, 3487],
               ["k2", "k0", None, "hot", "k3", "k2", "k3", "k3", "k1", "hot", None, "hot"],
               [1, 1, 2, 0, 0, 1, 0, 0, 2, 0, 2, 0])]
    opts = options("spilling_join", 2, 16)
    want = comparable(reference_pipeline(tables, spec_of(opts, 2)))
    got = run_sink(tables, opts, tmp_path, [[2, 4, 6], [5, 11, 12]], 2, 431, monkeypatch)
    assert comparable(got) == want


def test_the_sink_releases_what_only_the_hold_kept_back_when_the_hold_rises(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the property above: key ``k2``'s one join result was held back by the query's
    hold in batch 1; in batch 2 the hold rose, but the commit caught up only the groups whose
    ``R`` had risen, so ``k2``'s windows ending at 1-3 s came out at the end of input, after
    ``hot``'s windows ending at 3 s (same windows, not in order). A group is now behind when
    ``min(R, hold)`` rose, whichever of the two moved."""
    def stream(ts: list[int], keys: list[str | None], g: list[int], v: list[float | None],
               i: list[int | None], s: list[str | None]) -> pa.Table:
        return pa.table({"ts": ts, "k": keys, "g": g, "v": v, "i": i, "s": s}).cast(SCHEMA)

    n = None
    tables = [
        stream([766] * 8 + [3766] * 5, ["hot"] * 4 + ["k2"] + ["hot"] * 8, [0] * 13,
               [n] * 13, [n] * 13, [n] * 13),
        stream([338] * 12 + [1338, 2337, 2337, 3336, 4335, 4335, 4335, 4335, 4335],
               ["hot", "hot", "k2", "hot", "hot", "hot", "k0", n, "hot", n, n, "hot", "k3",
                "hot", n, "k0", "hot", "k3", n, "hot", "hot"],
               [2, 2, 2, 2, 0, 2, 2, 1, 0, 2, 0, 1, 2, 2, 2, 1, 0, 2, 0, 2, 0],
               [n, n, -math.inf, -math.inf, -1.5, n, n, 1e308, 0.2, 1000.0, 563.886670936216,
                5.343369346269252e16, -1.8302964274715212e-72, 5e-324, math.inf, -math.inf,
                -1e16, n, n, n, -1.6942180622107476e-104],
               [1, n, n, n, 9, n, -2, -1, -3, -4, 4, 4, 2, 2, 8, n, -6, n, n, 8, n],
               [n, "ab", "b", n, n, n, "zz", n, n, n, "b", "a", "ca", n, n, n, n, n, "ca",
                "zz", "b"])]
    opts = options("spilling_join", 2, 4)
    want = comparable(reference_pipeline(tables, spec_of(opts, 2)))
    got = run_sink(tables, opts, tmp_path, [[10, 12], [10, 21]], 2, 593, monkeypatch)
    assert [(r["k"], r["window_end"]) for r in got][:6] == [
        ("hot", 1000), ("k2", 1000), ("hot", 2000), ("k2", 2000), ("hot", 3000), ("k2", 3000)]
    assert comparable(got) == want


def test_end_of_input_rows_in_one_task_release_every_group_past_a_spilling_join(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every input's end-of-input row arrives in the last batch, in one task only; the rows
    are split over two tasks by partition group, as ``partition_for_sink`` does. The batch's
    ``R`` is +infinity, where nothing is held, so every group must release everything in it:
    the groups the other task ran to its lower ``R_task`` are behind even when the query's
    hold was below that ``R_task`` (a first version of the hold rule left them at the hold and
    their last windows came out at ``finish_sink``, after the other groups' later ones)."""
    rng = np.random.default_rng(1)
    tables = [join_stream(rng, 600) for _ in range(3)]
    opts = {"operators": "join(3, within=10 seconds, budget=4k)", "window": "1 second",
            "aggregates": "count(*) as n, first(v_0) as f", "keyColumns": "k",
            "partitionGroups": "8"}
    want = comparable(reference_pipeline(tables, spec_of(opts, 3)))

    def batches() -> Iterator[list[pa.Table]]:
        for lo in range(0, 600, 100):
            rows = pa.concat_tables([
                t.slice(lo, 100).append_column("input", pa.array([j] * 100, pa.int32()))
                .append_column("pos", pa.array(np.arange(lo, lo + 100), pa.int64()))
                .append_column("end", pa.array([False] * 100)) for j, t in enumerate(tables)])
            parts = split_by_group(rows, 8, 2)
            if lo == 500:
                ends = [pa.table({**{c: pa.nulls(1, f.type) for c, f in zip(
                    rows.column_names, rows.schema, strict=True)},
                    "input": pa.array([j], pa.int32()), "ts": pa.array([0], pa.int64()),
                    "pos": pa.array([600], pa.int64()), "end": pa.array([True])}).select(
                    rows.column_names) for j in range(3)]
                parts[0] = pa.concat_tables([parts[0], *ends])
            yield parts

    files = drive_sink({**opts, "inputs": "3", "endOfInputColumn": "end"}, tmp_path, batches(),
                       monkeypatch)
    assert "part-final.parquet" not in [f.name for f in files]  # all released at R = +inf
    assert comparable([r for f in files for r in pq.read_table(f).to_pylist()]) == want
