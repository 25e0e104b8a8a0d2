"""The ``ordered-agg`` sink's commit of a micro-batch on the driver: catch-up and bookkeeping.

The write tasks ran their groups to their own bounds (:mod:`~.sink_batch`); :func:`commit_step`
takes every task's report:

1. the batch's ``R`` from every task's largest event time per input, the end-of-input rows and
   the idle flags the previous commit decided for this batch; out-of-order rows are refused
   (``outOfOrder=fail``) or were dropped by the tasks and are counted;
2. with ``sequenceColumn``: the event times of each input along it must not decrease, also
   across tasks (:func:`~.sink_rows.sequence_drops`);
3. groups the tasks could not finish alone -- rows in several tasks (the stream was not
   partitioned by group), a task that reported an error, rows dropped in step 2 -- run here
   from the previous version with all their rows (``groups_on_driver``);
4. every other group that holds state and was released only to a lower bound runs to ``R``
   with no new rows (``groups_caught_up``), so the batch's output is exactly what one merge of
   all its rows would emit at ``R``. A group releases below ``min(R, hold)``
   (:func:`~.sink_batch.released_to`; ``hold`` is the query's hold bound after a join spilled),
   so a group is behind when that figure rose since it last ran: ``R_task`` or the previous
   ``R`` was lower, or only the previous batch's hold kept its results back (the marker
   records the hold as ``release_hold``);
5. the version's manifest names every partition group; the results come in the query's order.

Every group runs through the engine's one batch entry
(:class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`). Idle inputs (option
``idleTimeout``): the commit records per input when it last had rows (the driver's wall clock)
and flags for the *next* batch the inputs that have had none for the timeout.
:func:`finish_step` releases every group at +infinity (``finish_sink``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import InputError
from spark_stream_sched.runtime.engine.batch import empty_rows, query_hold
from spark_stream_sched.runtime.engine.order import in_output_order
from spark_stream_sched.runtime.engine.sink_batch import (
    DRIVER,
    Previous,
    TaskWork,
    batch_store,
    read_ipc,
    released_to,
    sink_batch,
    sink_hold,
    tagged,
)
from spark_stream_sched.runtime.engine.sink_config import GROUP_COL, SinkConfig
from spark_stream_sched.runtime.engine.sink_rows import (
    Prepared,
    combine_max,
    end_rows,
    late_mask,
    prepare,
    refuse_finished,
    sequence_drops,
)
from spark_stream_sched.runtime.merge import ready_bound
from spark_stream_sched.runtime.packets import TS_MAX
from spark_stream_sched.runtime.state.files import FileStateStore, file_stamp, version_dir
from spark_stream_sched.runtime.state.store import Entry


@dataclass(frozen=True)
class Staged:
    """One write task's staged rows file and what it did with them (None: nothing)."""

    file: str
    work: TaskWork | None

    @property
    def fine(self) -> bool:
        """The task finished its groups (it reported no error)."""
        return self.work is not None and self.work.error is None


@dataclass(frozen=True)
class DriverRows:
    """Rows the driver prepared itself.

    Those of the groups it redoes (``redo``, ``rows``), and those of the tasks that reported an
    error (``unfinished``: their counts and event times are in no task's report).
    """

    redo: set[int]
    rows: Prepared | None = None
    unfinished: Prepared | None = None


@dataclass
class Applied:
    """The result of one batch on the driver: what the commit marker records."""

    output: pa.Table | None
    input_max: list[int | None]
    finished: set[int]
    bound: int | None
    rows_in: int
    dropped: int
    idle_next: list[bool] = field(default_factory=list)
    last_rows_at: list[float | None] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    #: The hold bound the batch released under (the marker's ``release_hold``).
    hold: int | None = None


def commit_step(config: SinkConfig, batch_id: int, version: str,
                marker: Mapping[str, Any] | None, staged: Sequence[Staged], schema: pa.Schema,
                now: float) -> Applied:
    """Steps 1-5 of the module doc for one batch (``now``: the driver's wall clock, s).

    ``schema``: the runtime schema (input/end/sequence columns removed).

    Raises
    ------
    InputError
        Out-of-order rows under ``outOfOrder=fail``, rows for a finished input, a bad input id
        or event time (named).
    StateError
        A staged or state file cannot be read (named).
    """
    return _Commit(config, batch_id, version, Previous.of(marker, config.n_inputs), staged,
                   schema).run(now)


class _Commit:
    """One batch's commit on the driver (see :func:`commit_step`)."""

    def __init__(self, config: SinkConfig, batch_id: int, version: str, previous: Previous,
                 staged: Sequence[Staged], schema: pa.Schema) -> None:
        self.config, self.batch_id, self.version = config, batch_id, version
        self.previous, self.staged, self.schema = previous, list(staged), schema
        self.store = FileStateStore(config.state_location)
        self.start = previous.entries(self.store)  # None before the first batch
        self.base = self.start or {}
        #: The query's hold bound for this batch: the tasks ran under the same one.
        self.hold = sink_hold(config, previous, self.start)
        self.started = time.process_time()

    def run(self, now: float) -> Applied:
        works = [s.work for s in self.staged if s.fine and s.work is not None]
        for work in works:
            if work.late and self.config.spec.out_of_order == "fail":
                raise InputError(f"ordered-agg sink: batch {self.batch_id}: {work.late_example}")
        drops = self.sequence_drops()
        driver = self.redo(drops)
        batch_max, ends, rows_in = self.reported(works, driver)
        finished = self.previous.finished | ends
        bound = ready_bound(batch_max, [i in finished for i in range(self.config.n_inputs)],
                            self.previous.idle)
        entries, outputs = self.from_tasks(driver.redo)
        outputs += self.run_groups(sorted(driver.redo), driver.rows, self.start, bound, entries)
        behind = self.behind(entries, driver.redo, bound, self.hold)
        outputs += self.run_groups(behind, None, entries, bound, entries)
        self.store.commit(self.version, DRIVER, entries)
        seq_dropped = sum(int(m.sum()) for m in drops.values())
        seen = self.seen_at(works, driver, now)
        stats = {"groups_on_driver": len(driver.redo), "groups_caught_up": len(behind),
                 "rows_on_driver": 0 if driver.rows is None else driver.rows.rows.num_rows,
                 "tasks": len(self.staged), "tasks_cpu_s": round(sum(w.cpu_s for w in works), 6),
                 "worker_rss_bytes": max((w.rss for w in works if w.rss), default=None),
                 "hold_bound": query_hold(entries, None, False),
                 "state_bytes": state_bytes(self.config.state_location, entries),
                 "spill_bytes": sum(w.spill_bytes for w in works),
                 "started_at": min((w.started_at for w in works if w.started_at), default=now),
                 "driver_cpu_s": round(time.process_time() - self.started, 6)}
        return Applied(self.ordered(outputs), batch_max, finished, bound, rows_in - seq_dropped,
                       self.previous.dropped + sum(w.late for w in works) + seq_dropped,
                       self.idle_next(seen, finished, now), seen, stats, self.hold)

    # -- steps 2-3: what the driver redoes -------------------------------------------------

    def sequence_drops(self) -> dict[str, np.ndarray]:
        """Per staged file, rows dropped as out of order along ``sequenceColumn`` (step 2)."""
        c = self.config
        if c.sequence_column is None or not self.staged:
            return {}
        columns = [c.input_column, c.sequence_column, c.spec.timestamp_column]
        columns += [c.end_column] if c.end_column else []
        tables = [read_ipc(s.file, "staged file").select(columns) for s in self.staged]
        masks = sequence_drops(tables, c, self.batch_id, self.previous.input_max)
        return {s.file: m for s, m in zip(self.staged, masks, strict=True) if m.any()}

    def redo(self, drops: Mapping[str, np.ndarray]) -> DriverRows:
        """Groups the driver runs from the previous version, and their rows (step 3)."""
        owners: dict[int, int] = {}
        for s in self.staged:
            if s.fine and s.work is not None:
                for g in s.work.groups:
                    owners[g] = owners.get(g, 0) + 1
        redo = {g for g, k in owners.items() if k > 1}
        failed = [k for k, s in enumerate(self.staged) if not s.fine]
        dropped = [k for k, s in enumerate(self.staged) if s.file in drops]
        if not redo and not failed and not dropped:
            return DriverRows(redo)
        prepared, origin = self.prepare_all(drops)
        redo |= {int(g) for g in np.unique(prepared.groups[np.isin(origin, failed + dropped)])}
        return DriverRows(redo, prepared.select(np.isin(prepared.groups, sorted(redo))),
                          prepared.select(np.isin(origin, failed)))

    def prepare_all(self, drops: Mapping[str, np.ndarray]) -> tuple[Prepared, np.ndarray]:
        """All staged rows prepared at once, minus those dropped as out of order.

        Preparing them together keeps ``__seq`` ranks unique in the batch. Also returns the
        index of each row's staged file.
        """
        tables = [read_ipc(s.file, "staged file") for s in self.staged]
        table = pa.concat_tables(tables, promote_options="permissive")
        origin = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
        dropped = np.concatenate([drops.get(s.file, np.zeros(t.num_rows, bool))
                                  for s, t in zip(self.staged, tables, strict=True)])
        data = ~end_rows(table, self.config)
        prep = prepare(table, self.config, self.batch_id)
        origin, keep = origin[data], ~dropped[data]
        refuse_finished(prep, self.previous.finished, self.batch_id)
        late, example = late_mask(prep, self.previous.input_max)
        if late.any() and self.config.spec.out_of_order == "fail":
            raise InputError(f"ordered-agg sink: batch {self.batch_id}: {example}")
        keep &= ~late
        return (prep, origin) if keep.all() else (prep.select(keep), origin[keep])

    # -- steps 1, 3-5 -----------------------------------------------------------------------

    def reported(self, works: Sequence[TaskWork], driver: DriverRows
                 ) -> tuple[list[int | None], set[int], int]:
        """Largest event time per input, inputs ended and rows in, over the whole batch."""
        n = self.config.n_inputs
        reports = [(w.input_max, w.ends, w.rows) for w in works]
        if driver.unfinished is not None and driver.rows is not None:
            part = driver.unfinished
            reports.append((part.input_max(n), sorted(driver.rows.ends), part.counts(n)))
        batch_max, ends, rows_in = list(self.previous.input_max), set(), 0
        for top, ended, rows in reports:
            batch_max = combine_max(batch_max, top)
            ends |= set(ended)
            rows_in += sum(rows)
            for i in self.previous.finished:
                if rows[i]:
                    raise InputError(f"ordered-agg sink: batch {self.batch_id} has rows for "
                                     f"input {i}, which was declared finished by an "
                                     f"end-of-input row")
        return batch_max, ends, rows_in

    def from_tasks(self, redo: set[int]) -> tuple[dict[int, Entry | None], list[pa.Table]]:
        """Every group's entry (the tasks' where they finished it) and the tasks' results."""
        entries: dict[int, Entry | None] = dict.fromkeys(range(self.config.partition_groups))
        entries.update(self.base)
        outputs = []
        for s in self.staged:
            if not s.fine or s.work is None:
                continue
            entries.update({g: e for g, e in s.work.groups.items() if g not in redo})
            if s.work.output is not None:
                part = read_ipc(s.work.output, "staged result file")
                keep = ~np.isin(part.column(GROUP_COL).to_numpy(), sorted(redo))
                outputs.append(part.filter(pa.array(keep)))
        return entries, outputs

    def behind(self, entries: Mapping[int, Entry | None], redo: set[int],
               bound: int | None, hold: int | None) -> list[int]:
        """Groups holding state that released less than ``bound`` under ``hold`` do (step 4).

        A group a task ran released to ``min(R_task, hold)``; every other group to
        ``min(R, hold)`` of the previous batch (each commit catches every group up, so this
        holds by induction). Comparing ``R`` alone misses a group whose results only the hold
        kept back: when the hold rises, its results (a join's held results and the windows
        after them) must leave in this batch, before later batches' results of other groups.
        """
        target = released_to(bound, hold)
        used = {g: released_to(s.work.bound, hold) for s in self.staged
                if s.fine and s.work is not None for g in s.work.groups if g not in redo}
        before = released_to(self.previous.bound, self.previous.hold)
        return [g for g, e in sorted(entries.items()) if e is not None and g not in redo
                and _behind(used.get(g, before), target)]

    def run_groups(self, groups: Sequence[int], prepared: Prepared | None,
                   start: Mapping[int, Entry | None] | None, bound: int | None,
                   entries: dict[int, Entry | None]) -> list[pa.Table]:
        """Run ``groups`` from ``start`` to ``bound`` here; their entries go into ``entries``."""
        if not groups:
            return []
        rows = prepared.rows if prepared is not None else empty_rows(self.schema)
        store = batch_store(self.store, self.previous, self.version, DRIVER, start)
        result = sink_batch(self.config, self.schema, groups).run(
            rows, store, self.previous.bound, bound, self.hold)
        entries.update(store.written)
        staged = tagged(result.per_group)
        return [] if staged is None else [staged]

    def ordered(self, outputs: Sequence[pa.Table]) -> pa.Table | None:
        """Every group's results in the query's order (None: no result)."""
        parts = [t.drop_columns([GROUP_COL]) for t in outputs if t.num_rows]
        return in_output_order(self.config.spec, parts) if parts else None

    # -- idle inputs --------------------------------------------------------------------------

    def seen_at(self, works: Sequence[TaskWork], driver: DriverRows,
                now: float) -> list[float | None]:
        """Per input, when it last had rows (``now`` for the inputs of this batch)."""
        counts = np.zeros(self.config.n_inputs, np.int64)
        for w in works:
            counts += np.asarray(w.rows, np.int64)
        if driver.unfinished is not None:
            counts += np.asarray(driver.unfinished.counts(self.config.n_inputs), np.int64)
        return [now if counts[i] or last is None else last
                for i, last in enumerate(self.previous.last_rows_at)]

    def idle_next(self, seen: Sequence[float | None], finished: set[int],
                  now: float) -> list[bool]:
        """Inputs the next batch treats as idle: no rows for ``idleTimeout`` (wall clock)."""
        timeout = self.config.idle_timeout_ms
        return [timeout is not None and i not in finished and last is not None
                and (now - last) * 1000 >= timeout for i, last in enumerate(seen)]


def _behind(used: int | None, bound: int | None) -> bool:
    return bound is not None and (used is None or bound > used)


def finish_step(config: SinkConfig, marker: Mapping[str, Any], version: str,
                schema: pa.Schema) -> pa.Table | None:
    """Every group released at +infinity (every input finished); the results in order.

    Writes ``version`` (the ``final`` one) with the groups' last state.
    """
    previous = Previous.of(marker, config.n_inputs)
    commit = _Commit(config, -1, version, previous, [], schema)
    entries: dict[int, Entry | None] = dict.fromkeys(range(config.partition_groups))
    entries.update(commit.base)
    groups = [g for g, e in sorted(entries.items()) if e is not None]
    outputs = commit.run_groups(groups, None, commit.start, TS_MAX, entries)
    commit.store.commit(version, DRIVER, entries)
    return commit.ordered(outputs)


def state_bytes(location: str, entries: Mapping[int, Entry | None]) -> int:
    """Bytes of the state files ``entries`` name (the batch's figure ``state_bytes``)."""
    total = 0
    for entry in entries.values():
        if entry is not None:
            stamp = file_stamp(os.path.join(version_dir(location, entry.version), entry.name))
            total += 0 if stamp is None else stamp[0]
    return total
