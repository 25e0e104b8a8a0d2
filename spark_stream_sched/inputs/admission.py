"""Admission control of the ``ordered-agg`` source: the next offset, by rows, earliest first.

``latestOffset(start, limit)`` (driver) advances every input's cursor by its share of the row
budget: the earliest rows over all inputs by event time
(:func:`~spark_stream_sched.inputs.cursors.time_aligned_shares`), so no input runs ahead of the
others and the ready bound moves as far as the budget allows. Without a budget every listed row
is admitted. The timestamps peeked at to share the budget are cached across batches in the
driver (:class:`~spark_stream_sched.inputs.cursors.EventTimeCache`) and reused by
:func:`~spark_stream_sched.inputs.cursors.advance`. With ``splitRows=tasks`` the tasks read and
check the rows, and Parquet inputs are admitted by whole row groups from their footers'
statistics (:mod:`~spark_stream_sched.inputs.row_groups`), reading no timestamp on the driver.
Pure Python + PyArrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_stream_sched.inputs.cursors import (
    EventTimeCache,
    advance,
    advance_to,
    available_rows,
    peek_event_times,
    time_aligned_shares,
)
from spark_stream_sched.inputs.plan import SourcePlan
from spark_stream_sched.inputs.row_groups import admit_row_groups
from spark_stream_sched.inputs.streams import Cursor


def admit(plan: SourcePlan, cursors: Sequence[Cursor], files: Sequence[list[str]],
          budget: int | None, finish: bool, cache: EventTimeCache | None) -> tuple[Cursor, ...]:
    """Each input's cursor after this batch's rows (``budget``: rows; None: all listed).

    ``files`` are each input's admitted files; ``finish`` marks an input finished once its
    listed rows are consumed (``endOfInput``). Raises for out-of-order rows under
    ``outOfOrder=fail`` (named by :func:`~spark_stream_sched.inputs.cursors.advance`).
    """
    c, streams = plan.config, plan.streams
    if c.split_rows == "tasks":  # the tasks read and check the rows: admit by row groups
        by_groups = admit_row_groups(streams, files, cursors, budget, c.timestamp_column)
        if by_groups is not None:
            return tuple(advance_to(stream, files[j], cursors[j], by_groups[j].rows,
                                    by_groups[j].last_ts, finish)
                         for j, stream in enumerate(streams))
    avail = [0 if cur.finished else available_rows(files[j], cur, c.format, budget, streams[j])
             for j, cur in enumerate(cursors)]
    shares = avail
    heads: list[Any] = [None] * c.n_inputs
    if budget is not None:  # admit the earliest rows; their ts are reused by advance()
        cache = cache if cache is not None else EventTimeCache()
        for j, cursor in enumerate(cursors):
            cache.forget_before(files[j], cursor)
        peeked = [peek_event_times(s, files[j], cursors[j], avail[j], c.timestamp_column, cache)
                  for j, s in enumerate(streams)]
        shares = time_aligned_shares(peeked, [cur.last_ts for cur in cursors], budget)
        heads = [p[:n] for p, n in zip(peeked, shares, strict=True)]
    return tuple(advance(stream, files[j], cursors[j], shares[j], c.timestamp_column,
                         c.out_of_order, finish, heads[j])
                 for j, stream in enumerate(streams))
