"""``sessionize(gap)``: session windows per key with a static gap.

See Prasaad et al. (2018), TPCx-BB Q2/Q4.

Prasaad et al. (2018), §1, §2.1 (partitioned stateful operators) and Table 1 name "clustering
click-streams into sessions based on timeouts between two consecutive events" as the typical ordered
operator (Q2: a click-session of a user with a 60-minute timeout; Q4: pages visited per session).
The semantics are Spark's ``groupBy(keys, session_window(ts, gap))`` with a static gap (checked
against pyspark 4.3 in ``tests/spark/test_sessions_vs_spark.py``), applied in the total order ``(ts,
input, seq)``::

    gap = 5    ts:  1   3        9        14        20
    session A:      [1 ...... 8)                          3 <= 1+5 extends A; 9 > 3+5 opens B
    session B:                   [9 ...... 14 ..... 19)   14 == 9+5 still extends B (Spark
    session C:                                      [20 ...... 25)   merges touching sessions)

* a tuple with ``ts <= last_ts + gap`` of its key's open session extends that session (Spark
  merges the event windows ``[ts, ts + gap)`` when they overlap *or touch*), any other tuple
  opens a new one; ``session_start`` is the first ``ts``, ``session_end`` the last ``ts`` plus
  ``gap`` (int64 milliseconds);
* a session is emitted exactly once, by the first call whose ready bound proves it closed,
  ``bound > last_ts + gap`` (every later tuple has ``ts >= bound``, so none can touch it);
  :meth:`finish` emits the sessions still open;
* keys group by value as in Spark (:func:`~spark_stream_sched.runtime.keys.key_codes`: nulls
  are one key, ``-0.0`` is ``0.0``, NaN is NaN); a session's key columns hold the key in
  canonical form (:func:`~..keys.canonical_keys`: ``0.0``, the quiet NaN), as Spark emits it;
* output columns: ``session_start``, ``session_end``, the key columns, one column per aggregate
  alias (the types of the window aggregator; order-sensitive aggregates follow the total order);
* output order within one call: ``(session_end, session_start, keys)`` ascending, nulls first.
  Since a session emitted later ends after every bound given before, the concatenated outputs of
  all calls are in that order too, whatever the cut into calls.

State holds the raw rows of the open sessions (a session never holds more than the tuples of one
key with gaps of at most ``gap``) plus one row per open session (keys, id, start, last ts).
A closed session's aggregates are computed once, from all its rows in the total order, by the
window machinery's grouped kernels (:func:`~..window.panes.pane_partials`), so a floating sum is
exactly rounded (``docs/aggregates.md``) however the rows were split.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ConfigError, ExpressionError, InputError, StateError
from spark_stream_sched.runtime.aggregates import (
    BoundAggregate,
    bind,
    parse_aggregates,
    read_columns,
)
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.keyed.base import KeyedOperator, register
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.keys import canonical_keys, key_codes
from spark_stream_sched.runtime.packets import TS_MAX, event_times
from spark_stream_sched.runtime.state import snapshot
from spark_stream_sched.runtime.window.panes import PANE, WINDOW, combine_windows, pane_partials

SESSION_START = "session_start"
SESSION_END = "session_end"
_SID, _START, _LAST = "__sid", "__start", "__last"
_KIND = "keyed.sessionize"


def parse_gap(stage: StageSpec) -> int:
    """The gap of ``sessionize(gap)`` / ``sessionize(gap=...)`` in ms (ConfigError naming it)."""
    extra = [k for k, _ in stage.kwargs if k != "gap"]
    given = list(stage.args) + [v for k, v in stage.kwargs if k == "gap"]
    if extra or len(given) != 1:
        raise stage.fail("expected exactly one argument, the gap, e.g. "
                         "'sessionize(30 minutes)' or 'sessionize(gap=30 minutes)'")
    try:
        return parse_duration(given[0], "session gap")
    except ConfigError as exc:
        raise stage.fail(str(exc)) from exc


@register
class Sessionize(KeyedOperator):
    """Session windows per key with a static gap (see the module docstring).

    Notes
    -----
    Contract of :class:`~..keyed.base.KeyedOperator`: ``rows`` come in the total order and hold
    every tuple with ``ts < bound`` not given before; ``bound=None`` only buffers the rows.
    Not thread-safe. Raises ConfigError (naming the stage) for a bad gap, unknown columns or
    clashing names, InputError for rows that break the contract.
    """

    name = "sessionize"
    emits_rows = False

    def __init__(self, stage: StageSpec, input_schema: pa.Schema, key_columns: list[str],
                 ts_column: str, aggregates: tuple[str, ...] = ()) -> None:
        super().__init__(stage, input_schema, key_columns, ts_column, aggregates)
        self.gap_ms = parse_gap(stage)
        self._check_columns()
        try:
            specs = parse_aggregates(list(aggregates)) if aggregates else []
            self.bound_aggregates: list[BoundAggregate] = [bind(s, input_schema) for s in specs]
        except ExpressionError as exc:
            raise stage.fail(str(exc)) from exc
        self.columns = self._needed_columns()
        self._schema = output_schema(input_schema, self.key_columns, self.bound_aggregates, stage)
        rows_fields = [input_schema.field(c) for c in self.columns] + [pa.field(_SID, pa.int64())]
        self._rows = pa.schema(rows_fields).empty_table()
        session_fields = [input_schema.field(k) for k in self.key_columns]
        session_fields += [pa.field(c, pa.int64()) for c in (_SID, _START, _LAST)]
        self._sessions = pa.schema(session_fields).empty_table()
        self._inbox: list[pa.Table] = []
        self._bound: int | None = None
        self._next_sid = 0

    def _check_columns(self) -> None:
        names = self.input_schema.names
        for name in [self.ts_column, *self.key_columns]:
            if name not in names:
                raise self.stage.fail(f"column {name!r} is not in the input; columns are {names}")
        clash = {SESSION_START, SESSION_END} & set(self.key_columns)
        if clash:
            raise self.stage.fail(f"key columns may not be named {sorted(clash)}")

    def _needed_columns(self) -> list[str]:
        return list(dict.fromkeys([self.ts_column, *self.key_columns,
                                   *read_columns(self.bound_aggregates)]))

    @property
    def output_schema(self) -> pa.Schema:
        """``session_start``, ``session_end`` (int64 ms), key columns, aggregate aliases."""
        return self._schema

    # -- processing --------------------------------------------------------------------------

    def update(self, rows: pa.Table, bound: int | None) -> pa.Table:
        """Add released ``rows``; return the sessions ``bound`` proves closed (ordered)."""
        if rows.num_rows:
            self._inbox.append(self._checked(rows))
        if bound is None:
            return self._schema.empty_table()
        if self._bound is not None and bound < self._bound:
            raise InputError(f"operator {self.stage.text()!r}: ready bound went back from "
                             f"{self._bound} to {bound}")
        self._bound = bound
        if self._inbox:
            inbox, self._inbox = self._inbox, []
            self._absorb(pa.concat_tables(inbox) if len(inbox) > 1 else inbox[0])
        return self._emit(bound)

    def finish(self) -> pa.Table:
        """End of input: emit every session still open."""
        return self.update(self._rows.schema.empty_table(), TS_MAX)

    def _checked(self, rows: pa.Table) -> pa.Table:
        try:
            rows = rows.select(self.columns)
        except KeyError as exc:
            raise InputError(f"operator {self.stage.text()!r}: rows lack a column it needs "
                             f"({exc}); it needs {self.columns}") from exc
        ts = event_times(rows, self.ts_column, f"operator {self.stage.text()!r}")
        previous = self._inbox[-1] if self._inbox else None
        floor = self._bound if previous is None else int(
            event_times(previous, self.ts_column, "sessionize")[-1])
        if (floor is not None and ts[0] < floor) or bool(np.any(ts[1:] < ts[:-1])):
            raise InputError(f"operator {self.stage.text()!r}: rows are not in event-time "
                             f"order after ts {floor}; rows must come in the total order and "
                             f"at or after the last ready bound")
        return rows.cast(self._rows.schema.remove(len(self.columns)))

    def _absorb(self, rows: pa.Table) -> None:
        """Assign each row to its key's open session or a new one (vectorised)."""
        n_open = self._sessions.num_rows
        codes = np.zeros(n_open + rows.num_rows, dtype=np.int64)  # no key columns: one key
        if self.key_columns:
            codes = key_codes(pa.concat_tables([self._sessions.select(self.key_columns),
                                                rows.select(self.key_columns)]),
                              self.key_columns)
        open_of = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
        open_of[codes[:n_open]] = np.arange(n_open)
        order = np.argsort(codes[n_open:], kind="stable")  # by key, total order within a key
        key = codes[n_open:][order]
        ts = event_times(rows, self.ts_column, "sessionize")[order]
        first = np.r_[True, key[1:] != key[:-1]]
        opened = np.where(first, open_of[key], -1)
        last = self._sessions.column(_LAST).to_numpy().copy()
        previous = np.r_[ts[:1], ts[:-1]]
        previous[opened >= 0] = last[opened[opened >= 0]]
        new = (first & (opened < 0)) | (ts - previous > self.gap_ms)
        starts = np.flatnonzero(new | first)
        ends = np.r_[starts[1:], len(ts)] - 1
        fresh = new[starts]
        sid = np.empty(len(starts), dtype=np.int64)
        sid[~fresh] = self._sessions.column(_SID).to_numpy()[opened[starts[~fresh]]]
        sid[fresh] = self._next_sid + np.arange(int(fresh.sum()))
        self._next_sid += int(fresh.sum())
        last[opened[starts[~fresh]]] = ts[ends[~fresh]]
        row_sid = np.empty(len(ts), dtype=np.int64)
        row_sid[order] = np.repeat(sid, ends - starts + 1)
        self._rows = pa.concat_tables([self._rows, rows.append_column(_SID, pa.array(row_sid))])
        opened_now = self._sessions.set_column(
            self._sessions.schema.get_field_index(_LAST), _LAST, pa.array(last))
        born = canonical_keys(rows.take(pa.array(order[starts[fresh]])).select(self.key_columns),
                              self.key_columns)
        for name, values in ((_SID, sid[fresh]), (_START, ts[starts[fresh]]),
                             (_LAST, ts[ends[fresh]])):
            born = born.append_column(name, pa.array(values, pa.int64()))
        self._sessions = pa.concat_tables([opened_now, born.cast(self._sessions.schema)])

    def _emit(self, bound: int) -> pa.Table:
        """Emit and drop the sessions with ``last_ts + gap < bound``."""
        last = self._sessions.column(_LAST).to_numpy()
        closed = last < bound - self.gap_ms
        if not closed.any():
            return self._schema.empty_table()
        done = self._sessions.filter(pa.array(closed))
        self._sessions = self._sessions.filter(pa.array(~closed))
        in_done = np.isin(self._rows.column(_SID).to_numpy(), done.column(_SID).to_numpy())
        rows = self._rows.filter(pa.array(in_done))
        self._rows = self._rows.filter(pa.array(~in_done))
        return self._results(rows, done)

    def _results(self, rows: pa.Table, done: pa.Table) -> pa.Table:
        """One output row per session of ``done`` from its ``rows`` (in the total order)."""
        sid = rows.column(_SID).to_numpy()
        partials = pane_partials(rows.drop_columns([_SID]), sid, [], self.bound_aggregates)
        names = [WINDOW if n == PANE else n for n in partials.column_names]
        folded = combine_windows(partials.rename_columns(names), [], self.bound_aggregates)
        done_sid = done.column(_SID).to_numpy()
        by_sid = np.argsort(done_sid)
        where = by_sid[np.searchsorted(done_sid[by_sid], folded.column(WINDOW).to_numpy())]
        sessions = done.take(pa.array(where))
        start = sessions.column(_START).to_numpy()
        columns: dict[str, Any] = {
            SESSION_START: pa.array(start),
            SESSION_END: pa.array(sessions.column(_LAST).to_numpy() + self.gap_ms)}
        columns.update({k: sessions.column(k) for k in self.key_columns})
        columns.update({a.spec.alias: folded.column(a.spec.alias)
                        for a in self.bound_aggregates})
        out = pa.table(columns).cast(self._schema)
        sort_keys = [(c, "ascending", "at_start")
                     for c in [SESSION_END, SESSION_START, *self.key_columns]]
        return out.take(pc.sort_indices(out, sort_keys=sort_keys))

    # -- state -------------------------------------------------------------------------------

    @property
    def state_bytes(self) -> int:
        """Arrow buffer bytes of the open sessions' rows and descriptors."""
        return int(self._rows.nbytes + self._sessions.nbytes
                   + sum(t.nbytes for t in self._inbox))

    def snapshot(self) -> bytes:
        """The whole state (open sessions, their rows, buffered rows, cursors) as bytes."""
        meta = {"stage": [self.stage.name, list(self.stage.args),
                          [list(kv) for kv in self.stage.kwargs], self.stage.alias],
                "keys": self.key_columns, "ts_column": self.ts_column,
                "aggregates": list(self.aggregates), "bound": self._bound,
                "next_sid": self._next_sid}
        inbox = pa.concat_tables([self._rows.schema.remove(len(self.columns)).empty_table(),
                                  *self._inbox])
        tables = {"schema": self.input_schema.empty_table(), "rows": self._rows,
                  "sessions": self._sessions, "inbox": inbox}
        return snapshot.encode(_KIND, meta, tables)

    @classmethod
    def restore(cls, data: bytes) -> Sessionize:
        """Rebuild an operator from :meth:`snapshot` bytes (StateError if corrupt or foreign)."""
        meta, tables = snapshot.decode(data, _KIND)
        try:
            name, args, kwargs, alias = meta["stage"]
            stage = StageSpec(name, tuple(args), tuple((k, v) for k, v in kwargs), alias)
            op = cls(stage, tables["schema"].schema, meta["keys"], meta["ts_column"],
                     tuple(meta["aggregates"]))
            op._rows = tables["rows"].cast(op._rows.schema)
            op._sessions = tables["sessions"].cast(op._sessions.schema)
            inbox = tables["inbox"]
            op._bound, op._next_sid = meta["bound"], int(meta["next_sid"])
        except (KeyError, TypeError, ValueError, pa.ArrowInvalid) as exc:
            raise StateError(f"sessionize snapshot does not hold valid state ({exc!r}); "
                             f"restore from another checkpoint") from exc
        op._inbox = [inbox] if inbox.num_rows else []
        return op


def output_schema(input_schema: pa.Schema, key_columns: list[str],
                  aggregates: list[BoundAggregate], stage: StageSpec) -> pa.Schema:
    """Output schema of a session operator (ConfigError naming ``stage`` on a name clash)."""
    fields = [pa.field(SESSION_START, pa.int64()), pa.field(SESSION_END, pa.int64())]
    fields += [input_schema.field(k) for k in key_columns]
    clash = {a.spec.alias for a in aggregates} & {f.name for f in fields}
    if clash:
        raise stage.fail(f"aggregate aliases {sorted(clash)} clash with output columns")
    fields += [pa.field(a.spec.alias, a.output_type) for a in aggregates]
    return pa.schema(fields)
