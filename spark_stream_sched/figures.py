"""The per-batch figures of every door under one set of names (no pyspark).

Each door records its micro-batches where it can: the source a metrics file per batch under its
``stateLocation`` (:mod:`~spark_stream_sched.runtime.state.batch_metrics`), the sink a commit
marker per batch under its own (:mod:`~spark_stream_sched.runtime.state.commit_log`), and
``ordered()``, which runs inside Spark's stateful operator, in Spark's own progress of the query
(``StreamingQueryProgress``: the operator's state figures, and two observations the
transformation adds, :data:`OBSERVED_IN` and :data:`OBSERVED_OUT`). The functions here turn any
of the three into records with the same fields (:data:`FIELDS`), which ``progress`` returns and
``report`` draws:

================  ===============================================================================
``door``          ``source``, ``sink`` or ``ordered``
``batch_id``      Spark's batch id (the sink's :func:`finish_sink` commit: ``"final"``)
``rows_in``       input rows the batch took in (end-of-input rows not counted)
``windows_out``   result rows (windows) the batch emitted
``late_dropped``  input rows of the batch dropped as late or out of order
``state_bytes``   bytes of the query's state after the batch (source: the groups' serialized
                  state; sink: its state files of the committed version; ``ordered()``: the
                  RocksDB SST files, Spark's ``rocksdbSstFileSize``)
``spill_bytes``   bytes the ``join`` stages pushed to disk in the batch (None: not recorded)
``lag_ms``        how far the ready bound trails the newest event time read so far (0 once every
                  input has finished; None before the first bound)
``batch_seconds`` the batch's wall time as the door saw it (source: its first task's start to
                  its last task's end; sink: its first task's start to the commit marker;
                  ``ordered()``: Spark's ``triggerExecution``)
``ended_at``      wall clock (Unix seconds) at the batch's end
================  ===============================================================================

:func:`with_rates` adds ``rows_per_second``: rows in over the wall time since the previous
batch ended, so that the rates of a run average to its end-to-end rate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from spark_stream_sched.runtime.engine.sequence_order import NOTHING_SEEN, ready_bound_from_seen
from spark_stream_sched.runtime.packets import TS_MAX

#: The common fields of every door's batch records (module doc).
FIELDS = ("door", "batch_id", "rows_in", "windows_out", "late_dropped", "state_bytes",
          "spill_bytes", "lag_ms", "batch_seconds", "ended_at")
#: Name of the observation ``ordered()`` puts on its inputs: ``rows_in``, ``newest_ts`` (ms),
#: ``input_max`` (each input's largest event time in the batch, ms; an end-of-input row counts
#: as the largest event time).
OBSERVED_IN = "ordered_agg_in"
#: Spark's name of ``ordered()``'s stateful operator in a progress's ``stateOperators``.
ORDERED_OPERATOR = "applyInPandasWithState"
#: Name of the observation ``ordered()`` puts on its result: ``windows_out``.
OBSERVED_OUT = "ordered_agg_out"


def source_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """A source metrics record (merged batch file) with the common fields added."""
    started, ended = record.get("started_at"), record.get("ended_at")
    seconds = (ended - started if started is not None and ended is not None
               else record.get("seconds"))
    pushed = [record.get("join_pushed_bytes"), record.get("join_held_pushed_bytes")]
    return {**record, "door": "source", "rows_in": record.get("rows_read"),
            "windows_out": record.get("windows_out"),
            "late_dropped": record.get("late_dropped"), "state_bytes": record.get("state_bytes"),
            "spill_bytes": sum(int(p or 0) for p in pushed),
            "lag_ms": record.get("lag_ms"), "batch_seconds": seconds, "ended_at": ended}


def sink_figures(markers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The sink's commit markers (in commit order) with the common fields added.

    The markers count dropped rows since the query began; a batch's ``late_dropped`` is the
    difference with the marker before it.
    """
    out, dropped_before = [], 0
    for marker in markers:
        dropped = int(marker.get("dropped") or 0)
        started, ended = marker.get("started_at"), marker.get("committed_at")
        out.append({**marker, "door": "sink", "rows_in": marker.get("rows_in"),
                    "windows_out": marker.get("rows_out"),
                    "late_dropped": dropped - dropped_before,
                    "state_bytes": marker.get("state_bytes"),
                    "spill_bytes": marker.get("spill_bytes"),
                    "lag_ms": _lag(marker.get("input_max") or (), marker.get("ready_bound")),
                    "batch_seconds": (ended - started if started is not None
                                      and ended is not None else None),
                    "ended_at": ended})
        dropped_before = dropped
    return out


def ordered_figures(progress: Iterable[Any]) -> list[dict[str, Any]]:
    """Records of an ``ordered()`` query from Spark's progress of it, one per batch.

    ``progress``: pyspark ``StreamingQueryProgress`` objects (``query.recentProgress``) or the
    dicts of their JSON (``json.loads(p.json)``, e.g. lines a listener logged). Progress that
    lacks ``ordered()``'s observations (another query's) is skipped.
    """
    out: list[dict[str, Any]] = []
    newest: int | None = None
    input_max: list[int | None] = []
    for p in progress:
        raw = progress_dict(p)
        observed = raw.get("observedMetrics") or {}
        if OBSERVED_IN not in observed or OBSERVED_OUT not in observed:
            continue
        seen = observed[OBSERVED_IN].get("newest_ts")
        newest = seen if newest is None or (seen is not None and seen > newest) else newest
        input_max = _running_max(input_max, observed[OBSERVED_IN].get("input_max") or [])
        operators = [o for o in raw.get("stateOperators") or ()
                     if str(o.get("operatorName")) == ORDERED_OPERATOR]
        seconds = (raw.get("durationMs") or {}).get("triggerExecution")
        seconds = None if seconds is None else seconds / 1000
        started = _epoch(raw.get("timestamp"))
        out.append({
            "door": "ordered", "batch_id": raw.get("batchId"), "query_name": raw.get("name"),
            "rows_in": int(observed[OBSERVED_IN].get("rows_in") or 0),
            "windows_out": int(observed[OBSERVED_OUT].get("windows_out") or 0),
            "late_dropped": sum(int(o.get("numRowsDroppedByWatermark") or 0)
                                for o in operators),
            "state_bytes": sum(int((o.get("customMetrics") or {}).get(
                "rocksdbSstFileSize", o.get("memoryUsedBytes") or 0)) for o in operators)
            if operators else None,
            "spill_bytes": None,
            "lag_ms": _lag([newest], _ordered_bound(input_max)),
            "batch_seconds": seconds,
            "ended_at": None if started is None or seconds is None else started + seconds})
    return out


def is_spark_progress(record: Mapping[str, Any]) -> bool:
    """True for the JSON of a Spark ``StreamingQueryProgress`` (not a door's own record)."""
    return "batchId" in record and "durationMs" in record


def with_rates(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``rows_per_second``: rows in over the wall time since the previous batch ended.

    The first batch (or one whose previous end is unknown) divides by its own
    ``batch_seconds``; 0.0 when neither time is known.
    """
    previous_end = None
    for b in batches:
        rows, ended = float(b.get("rows_in") or 0), b.get("ended_at")
        span = (ended - previous_end if ended is not None and previous_end is not None
                else b.get("batch_seconds"))
        b["rows_per_second"] = rows / span if span else 0.0
        previous_end = ended
    return batches


def _lag(input_max: Iterable[int | None], bound: int | None) -> int | None:
    """How far ``bound`` trails the newest event time (0 once all finished; None: no bound)."""
    if bound is None:
        return None
    if bound >= TS_MAX:
        return 0
    newest = max((t for t in input_max if t is not None), default=None)
    return None if newest is None else max(0, newest - bound)


def _running_max(known: list[int | None], batch: Sequence[int | None]) -> list[int | None]:
    """Each input's largest event time over the batches so far (None: nothing seen yet)."""
    width = max(len(known), len(batch))
    old = [*known, *[None] * (width - len(known))]
    new = [*batch, *[None] * (width - len(batch))]
    return [a if b is None else b if a is None else max(a, b)
            for a, b in zip(old, new, strict=True)]


def _ordered_bound(input_max: Sequence[int | None]) -> int | None:
    """``ordered()``'s ready bound after a batch, as its processor computes it.

    ``input_max`` is each input's largest event time over the batches so far (None: nothing
    seen), an input that has ended counting as the largest event time (docs/transform.md).
    """
    if not input_max:
        return None
    seen = np.array([NOTHING_SEEN if t is None else t for t in input_max], np.int64)
    return ready_bound_from_seen(seen)


def _epoch(text: str | None) -> float | None:
    """Unix seconds of an ISO-8601 instant as Spark writes it (``...Z``); None for None."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def progress_dict(progress: Any) -> dict[str, Any]:
    """A Spark progress as the dict of its JSON.

    pyspark's ``StreamingQueryProgress`` is itself a dict of Python objects (UUIDs, nested
    progress objects); its ``.json`` is the JSON Spark writes, which is what is read here.
    """
    text = getattr(progress, "json", None)
    if isinstance(text, str):
        return dict(json.loads(text))
    return dict(progress)
