"""Ordered window aggregation over released tuples.

The Update and Output stages of Gulisano et al. (2016), §3; their Window Hive, §5.6.

:class:`WindowAggregator` receives tuples already in the total order ``(ts, input, seq)``
together with the ready bound ``R`` and emits each ``(window, key)`` result exactly once, when
``R >= window_end``. Internally it keeps

* ``pending``: tuples of panes that are not complete yet (``pane_end > R``), at most about one
  pane of tuples;
* ``panes``: partial aggregates of complete panes that some unemitted window still needs.

A pane's partial is computed once, from all its tuples in total order, and floating sums are
exact partials rounded once per window (``docs/aggregates.md``), so results do not depend on how
the input was split into updates or panes (tested bit for bit, floats included).

Output rows: ``window_start``, ``window_end`` (int64 ms), the key columns, one column per
aggregate alias; ordered by ``(window_end, window_start, keys)``, keys ascending with nulls first
(Spark's ascending order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError, InputError, StateError
from spark_stream_sched.runtime import exact_split
from spark_stream_sched.runtime.aggregates import (
    AggSpec,
    BoundAggregate,
    bind,
    parse_aggregates,
    read_columns,
)
from spark_stream_sched.runtime.exact_partials import is_exact
from spark_stream_sched.runtime.exact_split import PANE_SUM_TYPE
from spark_stream_sched.runtime.order_codes import dense_ids
from spark_stream_sched.runtime.packets import TS_MAX, event_times
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.runtime.window import dense_combine as dense
from spark_stream_sched.runtime.window import dense_panes
from spark_stream_sched.runtime.window.panes import (
    PANE,
    WINDOW,
    combine_windows,
    expand_to_windows,
    pane_partials,
    with_group_keys,
)
from spark_stream_sched.runtime.window.runs import Run, plan_runs
from spark_stream_sched.runtime.window.spec import WindowSpec

WINDOW_START = "window_start"
WINDOW_END = "window_end"
#: Layout of :meth:`WindowAggregator.snapshot`: 2 since floating sums are exact partials
#: (version 1 kept them as float64, which no later pane can be added to exactly).
STATE_VERSION = 2
#: Spark's type for window bounds when the event time is a timestamp.
SPARK_TIMESTAMP = pa.timestamp("us", tz="UTC")


#: Result columns holding event-time bounds in int64 ms (windows, and sessions of
#: :mod:`spark_stream_sched.runtime.keyed.sessions`).
BOUND_COLUMNS = (WINDOW_START, WINDOW_END, "session_start", "session_end")


def bounds_as_timestamps(out: pa.Table) -> pa.Table:
    """Window or session bounds (int64 ms) as UTC microsecond timestamps (Spark's type).

    The one conversion used wherever an event-time column is a timestamp (source and sink);
    integer event times keep int64 millisecond bounds. Bounds absent from ``out`` (a pipeline
    that returns rows) are left alone.
    """
    for name in BOUND_COLUMNS:
        if name not in out.column_names or not pa.types.is_integer(out.schema.field(name).type):
            continue
        micros = pc.multiply(out.column(name), 1000).cast(SPARK_TIMESTAMP)
        out = out.set_column(out.schema.get_field_index(name), name, micros)
    return out


class WindowAggregator:
    """Sliding/tumbling window aggregation grouped by zero or more key columns.

    Parameters
    ----------
    spec:
        Window size and slide.
    key_columns:
        Group-by columns (may be empty).
    aggregates:
        Parsed :class:`AggSpec` list (see :func:`parse_aggregates`) or expression strings.
    ts_column:
        Event-time column (int64 ms or timestamp).
    input_schema:
        Schema of the rows passed to :meth:`update`; columns are checked here, so a bad query
        fails at construction, not at the first tuple.
    mode:
        ``"auto"`` (default) picks, per run (:mod:`.runs`), dense NumPy grids or Arrow hash
        aggregation; ``"dense"``/``"sparse"`` force one (for tests and benchmarks). Results
        are identical.

    Notes
    -----
    Contract of :meth:`update`: ``rows`` are in the total order and hold every tuple with
    ``ts < ready_bound`` not given before; bounds never decrease. Not thread-safe.
    """

    def __init__(self, spec: WindowSpec, key_columns: list[str],
                 aggregates: list[AggSpec] | list[str] | str, ts_column: str,
                 input_schema: pa.Schema, mode: str = "auto") -> None:
        if mode not in ("auto", "dense", "sparse"):
            raise ConfigError(f"window aggregation mode {mode!r} is unknown; use auto, dense "
                              f"or sparse")
        self.mode = mode
        self.spec = spec
        self.key_columns = list(key_columns)
        specs = parse_aggregates(aggregates) if isinstance(aggregates, str) or (
            aggregates and isinstance(aggregates[0], str)) else list(aggregates)
        self.ts_column = ts_column
        self.input_schema = input_schema
        self._check_columns(input_schema)
        self.aggregates: list[BoundAggregate] = [bind(s, input_schema) for s in specs]  # type: ignore[arg-type]
        self.columns = self._needed_columns()
        # No rows yet: Table.from_batches builds no array, so no pandas import (0.26 s of CPU)
        # on a driver that only plans (Schema.empty_table goes through pa.array).
        self._pending: pa.Table = pa.Table.from_batches([], input_schema).select(self.columns)
        self._panes: list[pa.Table] = []
        self._bound: int | None = None
        self._next_k: int | None = None
        self.output_schema = self._output_schema()
        self._partial_schema = self._pane_schema()
        self._dense_ok = dense.supports(self.aggregates)

    # -- construction helpers ----------------------------------------------------------------

    def _check_columns(self, schema: pa.Schema) -> None:
        for name in [self.ts_column, *self.key_columns]:
            if name not in schema.names:
                raise ConfigError(f"column {name!r} not found in the input; columns are "
                                  f"{schema.names}")
        reserved = {WINDOW_START, WINDOW_END} & set(self.key_columns)
        if reserved:
            raise ConfigError(f"key columns may not be named {sorted(reserved)}")

    def _needed_columns(self) -> list[str]:
        return list(dict.fromkeys([self.ts_column, *self.key_columns,
                                   *read_columns(self.aggregates)]))

    def _output_schema(self) -> pa.Schema:
        fields = [pa.field(WINDOW_START, pa.int64()), pa.field(WINDOW_END, pa.int64())]
        fields += [self.input_schema.field(k) for k in self.key_columns]
        aliases = [a.spec.alias for a in self.aggregates]
        clash = set(aliases) & {f.name for f in fields}
        if clash:
            raise ConfigError(f"aggregate aliases {sorted(clash)} clash with output columns")
        fields += [pa.field(a.spec.alias, a.output_type) for a in self.aggregates]
        return pa.schema(fields)

    def _pane_schema(self) -> pa.Schema:
        """The fixed schema of pane partials in memory (both stage-1 paths are cast to it).

        Snapshots keep floating sums as exact partials (:func:`.exact_split.stored`).
        """
        fields = [pa.field(PANE, pa.int64())]
        fields += [self.input_schema.field(k) for k in self.key_columns]
        for i, agg in enumerate(self.aggregates):
            func = agg.spec.func
            if func in ("count", "count_where"):
                fields.append(pa.field(f"a{i}_n", pa.int64()))
            elif func in ("sum", "avg"):
                fields.append(pa.field(f"a{i}_sum",
                                       PANE_SUM_TYPE if is_exact(agg) else pa.int64()))
                if func == "avg":
                    fields.append(pa.field(f"a{i}_n", pa.int64()))
            else:
                fields.append(pa.field(f"a{i}_v", agg.output_type))
                if func.endswith("_where"):
                    fields.append(pa.field(f"a{i}_found", pa.bool_()))
                if agg.order_type is not None:
                    fields.append(pa.field(f"a{i}_o", agg.order_type))
        return pa.schema(fields)

    # -- processing --------------------------------------------------------------------------

    def update(self, rows: pa.Table, ready_bound: int | None) -> pa.Table:
        """Add released ``rows`` and emit every window with ``window_end <= ready_bound``."""
        if rows.num_rows:
            self._append(rows)
        if ready_bound is None:
            return self.output_schema.empty_table()
        if self._bound is not None and ready_bound < self._bound:
            raise InputError(f"ready bound went back from {self._bound} to {ready_bound}")
        self._bound = ready_bound
        self._complete_panes(ready_bound)
        return self._emit(ready_bound)

    def finish(self) -> pa.Table:
        """All input has been given: emit every remaining window."""
        return self.update(self._pending.schema.empty_table(), TS_MAX)

    def _append(self, rows: pa.Table) -> None:
        try:
            rows = rows.select(self.columns)
        except KeyError as exc:
            raise InputError(f"rows lack a column the query needs: {exc}") from exc
        ts = event_times(rows, self.ts_column, "window input")
        if self._bound is not None and ts[0] < self._bound:
            raise InputError(f"a tuple with ts {int(ts[0])} arrived after ready bound "
                             f"{self._bound} had closed its panes; rows must be released in order")
        if not rows.schema.equals(self._pending.schema):
            rows = rows.cast(self._pending.schema)
        self._pending = pa.concat_tables([self._pending, rows])

    def _complete_panes(self, bound: int) -> None:
        pane_ms = self.spec.pane_ms
        cutoff = bound if bound == TS_MAX else (bound // pane_ms) * pane_ms
        ts = event_times(self._pending, self.ts_column, "window input")
        cut = len(ts) if bound == TS_MAX else int(np.searchsorted(ts, cutoff, side="left"))
        if cut == 0:
            return
        done = self._pending.slice(0, cut).combine_chunks()
        self._pending = self._pending.slice(cut)
        pane = np.floor_divide(ts[:cut], pane_ms)
        done, grouping = with_group_keys(done, self.key_columns)
        partials = None
        if self.mode != "sparse" and dense_panes.supports(self.aggregates):
            partials = dense_panes.pane_partials_dense(done, pane, grouping, self.aggregates,
                                                       force=self.mode == "dense")
        if partials is None:
            partials = pane_partials(done, pane, grouping, self.aggregates)
        names = partials.column_names
        partials = partials.rename_columns([PANE, *self.key_columns, *names[1 + len(grouping):]])
        self._panes.append(partials.select(self._partial_schema.names).cast(self._partial_schema))

    def _emit(self, bound: int) -> pa.Table:
        """Emit the windows closed by ``bound`` that were not emitted yet, then prune panes."""
        k_closed = self.spec.last_closed_window(bound)
        if not self._panes or (self._next_k is not None and k_closed < self._next_k):
            return self.output_schema.empty_table()
        panes = pa.concat_tables(self._panes) if len(self._panes) > 1 else self._panes[0]
        pane = panes.column(PANE).to_numpy()
        k_first, k_last = self.spec.window_range_of_pane(pane[[0, -1]])
        k_lo = int(k_first[0]) if self._next_k is None else max(self._next_k, int(k_first[0]))
        k_hi = min(k_closed, int(k_last[1]))
        mode = self.mode if self._dense_ok else "sparse"
        n_keys = self._distinct_keys(panes) if mode != "sparse" else 1
        chunks = [self._combine_run(panes, pane, run)
                  for run in plan_runs(self.spec, pane, k_lo, k_hi, n_keys, mode)]
        self._next_k = k_closed + 1
        needed_from = -((-self._next_k * self.spec.slide_ms) // self.spec.pane_ms)
        remaining = panes.slice(int(np.searchsorted(pane, needed_from, side="left")))
        self._panes = [remaining] if remaining.num_rows else []
        return self._finalise(chunks)

    def _distinct_keys(self, panes: pa.Table) -> int:
        """The number of distinct keys among ``panes`` (1 without key columns)."""
        return dense_ids(panes, self.key_columns)[1].num_rows if self.key_columns else 1

    def _combine_run(self, panes: pa.Table, pane: np.ndarray, run: Run) -> pa.Table:
        """Combine the windows of ``run`` (:mod:`.runs`): on a grid, or by expansion."""
        slide_panes = self.spec.slide_ms // self.spec.pane_ms
        width = self.spec.size_ms // self.spec.pane_ms
        p_first = run.lo * slide_panes
        a, b = np.searchsorted(pane, [p_first, run.hi * slide_panes + width], side="left")
        part = panes.slice(int(a), int(b - a))
        if run.dense:
            return dense.combine_dense(part, p_first, run.lo, run.hi - run.lo + 1, slide_panes,
                                       width, self.key_columns, self.aggregates)
        k_first, k_last = self.spec.window_range_of_pane(pane[a:b])
        expanded = expand_to_windows(part, np.maximum(k_first, run.lo),
                                     np.minimum(k_last, run.hi))
        result = combine_windows(expanded, self.key_columns, self.aggregates, part)
        sort_keys = [(WINDOW, "ascending", "at_start")]
        sort_keys += [(k, "ascending", "at_start") for k in self.key_columns]
        return result.take(pc.sort_indices(result, sort_keys=sort_keys))

    def _finalise(self, chunks: list[pa.Table]) -> pa.Table:
        chunks = [c for c in chunks if c.num_rows]
        if not chunks:
            return self.output_schema.empty_table()
        result = pa.concat_tables(chunks) if len(chunks) > 1 else chunks[0]
        k = result.column(WINDOW).to_numpy()
        start = k * self.spec.slide_ms
        columns: dict[str, Any] = {WINDOW_START: pa.array(start),
                                   WINDOW_END: pa.array(start + self.spec.size_ms)}
        for name in self.output_schema.names[2:]:
            columns[name] = result.column(name)
        return pa.table(columns).cast(self.output_schema)

    # -- state -------------------------------------------------------------------------------

    @property
    def state_bytes(self) -> int:
        """Arrow buffer bytes held in state."""
        return int(self._pending.nbytes + sum(t.nbytes for t in self._panes))

    def snapshot(self) -> bytes:
        """Serialise the state (pending tuples, pane partials, cursors) to bytes."""
        meta = {
            "size_ms": self.spec.size_ms, "slide_ms": self.spec.slide_ms,
            "keys": self.key_columns, "ts_column": self.ts_column,
            "aggregates": [a.spec.text() for a in self.aggregates],
            "bound": self._bound, "next_k": self._next_k, "mode": self.mode,
            "state_version": STATE_VERSION,
        }
        tables = {"schema": self.input_schema.empty_table(), "pending": self._pending}
        if self._panes:
            tables["panes"] = exact_split.stored(pa.concat_tables(self._panes))
        return snapshot.encode("window", meta, tables)

    @classmethod
    def restore(cls, data: bytes) -> WindowAggregator:
        """Rebuild a :class:`WindowAggregator` from :meth:`snapshot` bytes."""
        meta, tables = snapshot.decode(data, "window")
        op = cls(WindowSpec(meta["size_ms"], meta["slide_ms"]), meta["keys"],
                 meta["aggregates"], meta["ts_column"], tables["schema"].schema,
                 meta.get("mode", "auto"))
        op._pending = tables["pending"]
        if "panes" in tables:
            panes = exact_split.loaded(tables["panes"])
            _check_partials(tables["panes"].schema, panes.schema, op._partial_schema,
                            meta.get("state_version", 1))
            op._panes = [panes]
        op._bound, op._next_k = meta["bound"], meta["next_k"]
        return op


def _check_partials(found: pa.Schema, read: pa.Schema, expected: pa.Schema,
                    version: int) -> None:
    """Refuse pane partials of another layout (version 1 kept floating sums as float64).

    ``found`` is the stored schema, ``read`` the same partials in memory (pane sums).
    """
    if version > STATE_VERSION:
        raise StateError(f"window state version {version} was written by a newer version of "
                         f"spark_stream_sched (this one reads up to {STATE_VERSION}); run the "
                         f"query with that version")
    if not read.equals(expected):
        raise StateError(
            f"window state version {version} holds pane partials this version cannot continue "
            f"(floating sums are exact partials since state version {STATE_VERSION}; found "
            f"{found}); finish the query with the version that wrote it, or restart it from a "
            f"new checkpoint location")
