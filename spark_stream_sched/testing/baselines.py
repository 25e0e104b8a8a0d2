"""Straightforward per-tuple baselines: a ``heapq.merge`` k-way merge and the MQ aggregate.

Both are deliberately simple Python, one tuple at a time, so that they are easy to trust. They
serve as (1) the baselines the benchmarks compare the vectorised runtime against, and (2) a second
oracle: their results must equal the runtime's.

* :func:`heapq_merge` -- merge N timestamp-sorted inputs into the total order ``(ts, input,
  seq)`` with :func:`heapq.merge` over per-row ``(ts, input, seq)`` tuples.
* :class:`MQAggregate` -- the multi-queue (MQ) multiway aggregate of Gulisano et al. (2016), §5.3,
  Algorithm 2,
  as used by Borealis and StreamCloud: **Add** appends tuples to per-input queues;
  **SMergeUpdateOutput** waits until every unfinished input has a queued tuple, takes the one
  with the lowest ``(ts, input)``, outputs the winsets whose start is lower than the earliest
  window start of that tuple (they can no longer receive tuples), creates missing winsets and
  windows, and updates them. Winsets live in an insertion-ordered dict (the paper's list).

The MQ aggregate parses aggregate expressions with the runtime's parser
(:func:`~spark_stream_sched.runtime.aggregates.parse_aggregates`) and evaluates predicates with
its row evaluator (``Predicate.evaluate_row``); the folding, windowing and merging are its own.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.runtime.aggregates import BoundAggregate, bind, parse_aggregates
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

_UNSET = object()
Step = Callable[[Any, tuple[Any, ...]], Any]


def heapq_merge_order(inputs: Sequence[pa.Table], ts_column: str = "ts") -> list[tuple[int, ...]]:
    """Merge the inputs' ``(ts, input, seq)`` tuples with :func:`heapq.merge`.

    Returns the list of ``(ts, input, seq)`` tuples in the total order. Each input must be
    sorted by ``ts`` (not checked: ``heapq.merge`` assumes it).
    """
    streams = [
        zip(t.column(ts_column).to_pylist(), itertools.repeat(i), itertools.count(), strict=False)
        for i, t in enumerate(inputs)
    ]
    return list(heapq.merge(*streams))


def heapq_merge(inputs: Sequence[pa.Table], ts_column: str = "ts") -> pa.Table:
    """Merge N ts-sorted inputs into one table in the total order ``(ts, input, seq)``.

    The result has the inputs' columns plus ``__input`` (int32) and ``__seq`` (int64), like
    the runtime's ``SMerge.pop_ready``. The order comes from :func:`heapq_merge_order`; the
    rows are then gathered with one vectorised ``take``.
    """
    order = heapq_merge_order(inputs, ts_column)
    parts = [
        t.append_column(INPUT_COL, pa.array(np.full(t.num_rows, i, np.int32)))
        .append_column(SEQ_COL, pa.array(np.arange(t.num_rows, dtype=np.int64)))
        for i, t in enumerate(inputs)
    ]
    offsets = np.cumsum([0] + [t.num_rows for t in inputs])
    index = np.fromiter((offsets[i] + seq for _, i, seq in order), np.int64, len(order))
    return pa.concat_tables(parts).take(pa.array(index))


def _step(agg: BoundAggregate, slot: int, pred_cols: Sequence[str]) -> Step:
    """Build ``step(state, row) -> state`` for one aggregate; ``row[slot]`` is its column."""
    func, predicate = agg.spec.func, agg.predicate

    def pred(row: tuple[Any, ...]) -> bool:
        assert predicate is not None
        return predicate.evaluate_row(dict(zip(pred_cols, row[-len(pred_cols):], strict=True)))

    def skip_null(fold: Callable[[Any, Any], Any]) -> Step:
        return lambda s, r: s if r[slot] is None else (r[slot] if s is None else fold(s, r[slot]))

    steps: dict[str, Step] = {
        "count": (lambda s, r: s + 1) if agg.spec.column == "*"
        else (lambda s, r: s + (r[slot] is not None)),
        "count_where": lambda s, r: s + pred(r),
        "sum": skip_null(lambda s, v: s + v),
        "min": skip_null(min),
        "max": skip_null(max),
        "avg": lambda s, r: s if r[slot] is None else (s[0] + r[slot], s[1] + 1),
        "first": lambda s, r: r[slot] if s is _UNSET else s,
        "last": lambda s, r: r[slot],
        "first_where": lambda s, r: r[slot] if s is _UNSET and pred(r) else s,
        "last_where": lambda s, r: r[slot] if pred(r) else s,
    }
    return steps[func]


def _initial(func: str) -> Any:
    """Return the state of an aggregate over no tuples."""
    return {"count": 0, "count_where": 0, "avg": (0, 0)}.get(
        func, _UNSET if func in ("first", "last", "first_where", "last_where") else None)


def _final(func: str, state: Any) -> Any:
    """Turn a state into the aggregate's value (Spark SQL: avg of no values is null)."""
    if func == "avg":
        return state[0] / state[1] if state[1] else None
    return None if state is _UNSET else state


class MQAggregate:
    """The MQ multiway aggregate of Gulisano et al. (2016), §5.3 (Algorithm 2), one tuple at a time.

    Parameters
    ----------
    n_inputs : int
        Number of input streams.
    size_ms, slide_ms : int
        Window size and advance; window k covers ``[k*slide, k*slide + size)``.
    key_columns : sequence of str
        Group-by columns (may be empty).
    aggregates : sequence of str
        Aggregate expressions in the runtime's syntax, e.g. ``"first(value) as f"``.
    input_schema : pyarrow.Schema
        Schema of the input rows (columns and aggregate types are checked against it).
    ts_column : str
        Event-time column (int64 ms).
    trace : bool
        Record ``(input, seq)`` of every tuple in processing order in :attr:`processed`.

    Notes
    -----
    Output rows (:meth:`result`) are ``window_start, window_end, keys..., aggregates...`` for each
    (window, key) that received a tuple, ordered by window and then key ascending. Inputs must be
    sorted by ``ts``; unlike the runtime, MQ does not check it.
    """

    def __init__(self, n_inputs: int, size_ms: int, slide_ms: int, key_columns: Sequence[str],
                 aggregates: Sequence[str], input_schema: pa.Schema, ts_column: str = "ts",
                 trace: bool = False) -> None:
        if n_inputs < 1 or size_ms < 1 or slide_ms < 1:
            raise ConfigError("MQAggregate needs n_inputs, size_ms and slide_ms >= 1")
        self.size, self.slide = size_ms, slide_ms
        self.key_columns, self.ts_column = list(key_columns), ts_column
        self.bound = [bind(spec, input_schema) for spec in parse_aggregates(list(aggregates))]
        self._value_cols = [a.spec.column for a in self.bound]
        pred_cols = sorted(set().union(*(a.predicate.columns for a in self.bound if a.predicate)))
        self._pred_cols = pred_cols
        self._steps = [_step(a, i, pred_cols) for i, a in enumerate(self.bound)]
        self._funcs = [a.spec.func for a in self.bound]
        self._schema = input_schema
        self._queues: list[deque[tuple[Any, ...]]] = [deque() for _ in range(n_inputs)]
        self._seqs = [0] * n_inputs
        self._finished = [False] * n_inputs
        self._winsets: dict[int, dict[tuple[Any, ...], list[Any]]] = {}
        self._out: list[tuple[Any, ...]] = []
        self.processed: list[tuple[int, int]] | None = [] if trace else None

    # -- Add --------------------------------------------------------------------------------

    def add(self, input_id: int, table: pa.Table) -> None:
        """Append the rows of ``table`` (next rows of ``input_id``) to that input's queue."""
        if self._finished[input_id]:
            raise InputError(f"input {input_id} was already finished; it cannot send more rows")
        cols = [self.ts_column, *self.key_columns]
        cols += [c if c not in (None, "*") else self.ts_column for c in self._value_cols]
        cols += self._pred_cols
        values = [table.column(c).to_pylist() for c in cols]
        seq0 = self._seqs[input_id]
        self._seqs[input_id] += table.num_rows
        self._queues[input_id].extend(zip(*values, itertools.count(seq0), strict=False))

    def finish(self, input_id: int) -> None:
        """Declare that ``input_id`` sends nothing more."""
        self._finished[input_id] = True

    # -- SMergeUpdateOutput -------------------------------------------------------------------

    def smerge_update_output(self) -> int:
        """Process queued tuples while every unfinished input has one; return how many."""
        done = 0
        queues, finished = self._queues, self._finished
        while True:
            best = -1
            for i, queue in enumerate(queues):
                if not queue:
                    if not finished[i]:
                        return done  # L5: wait until every input has delivered a tuple
                elif best < 0 or queue[0][0] < queues[best][0][0]:
                    best = i
            if best < 0:
                self._emit_before(None)
                return done
            self._update(queues[best].popleft(), best)
            done += 1

    def _update(self, row: tuple[Any, ...], input_id: int) -> None:
        """Update (and create) the windows of ``row``; output winsets it can no longer reach."""
        ts, nk = row[0], len(self.key_columns)
        first = (ts - self.size) // self.slide * self.slide + self.slide
        self._emit_before(first)
        key = row[1:1 + nk]
        values = row[1 + nk:-1]
        for start in range(first, ts // self.slide * self.slide + 1, self.slide):
            winset = self._winsets.get(start)
            if winset is None:
                winset = self._winsets[start] = {}
            window = winset.get(key)
            if window is None:
                window = winset[key] = [_initial(f) for f in self._funcs]
            for j, step in enumerate(self._steps):
                window[j] = step(window[j], values)
        if self.processed is not None:
            self.processed.append((input_id, row[-1]))

    def _emit_before(self, start: int | None) -> None:
        """Output every winset that starts before ``start`` (all of them when None)."""
        while self._winsets:
            first = next(iter(self._winsets))
            if start is not None and first >= start:
                return
            winset = self._winsets.pop(first)
            for key in sorted(winset, key=_key_order):
                window = winset[key]
                results = (_final(f, s) for f, s in zip(self._funcs, window, strict=True))
                self._out.append((first, first + self.size, *key, *results))

    def result(self) -> pa.Table:
        """Return every output row so far, as a table (see the class Notes)."""
        fields = [pa.field("window_start", pa.int64()), pa.field("window_end", pa.int64())]
        fields += [self._schema.field(c) for c in self.key_columns]
        fields += [pa.field(a.spec.alias, a.output_type) for a in self.bound]
        columns = list(zip(*self._out, strict=True)) or [() for _ in fields]
        return pa.table([pa.array(list(c), f.type) for c, f in zip(columns, fields, strict=True)],
                        schema=pa.schema(fields))


def _key_order(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """Sort key for group-by keys: ascending, nulls first (Spark's ascending order)."""
    return tuple((v is not None, v) for v in key)


def mq_aggregate(inputs: Sequence[pa.Table], size_ms: int, slide_ms: int,
                 key_columns: Sequence[str], aggregates: Sequence[str], ts_column: str = "ts",
                 batch_rows: int = 4096) -> pa.Table:
    """Run :class:`MQAggregate` over finite inputs fed round-robin in ``batch_rows`` slices."""
    if not inputs:
        raise ConfigError("mq_aggregate needs at least one input")
    mq = MQAggregate(len(inputs), size_ms, slide_ms, key_columns, aggregates,
                     inputs[0].schema, ts_column)
    for lo in range(0, max(t.num_rows for t in inputs) + 1, batch_rows):
        for i, table in enumerate(inputs):
            if lo < table.num_rows:
                mq.add(i, table.slice(lo, batch_rows))
            if lo < table.num_rows <= lo + batch_rows or lo == table.num_rows == 0:
                mq.finish(i)
        mq.smerge_update_output()
    return mq.result()


def results_difference(actual: pa.Table, expected: pa.Table, rel_tol: float = 1e-9) -> str | None:
    """Describe the first difference between two window results; None when they match.

    Schemas, row counts, row order and every value must be equal, except floating-point
    values, which may differ by ``rel_tol`` (relative): the runtime's floating sums and averages
    are exactly rounded (``docs/aggregates.md``) while MQ, as the paper's baseline, adds tuple by
    tuple in float64.
    """
    if actual.schema != expected.schema:
        return f"schemas differ: {actual.schema} vs {expected.schema}"
    if actual.num_rows != expected.num_rows:
        return f"row counts differ: {actual.num_rows} vs {expected.num_rows}"
    for name in actual.column_names:
        a, e = actual.column(name).to_pylist(), expected.column(name).to_pylist()
        for row, (x, y) in enumerate(zip(a, e, strict=True)):
            if x != y and not (isinstance(x, float) and isinstance(y, float)
                               and abs(x - y) <= rel_tol * max(abs(x), abs(y))):
                return f"row {row}, column {name!r}: {x!r} vs {y!r}"
    return None
