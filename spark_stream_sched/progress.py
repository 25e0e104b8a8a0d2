"""Progress of ``ordered-agg`` queries read from their files: any client, no listener, no pyspark.

The source writes one metrics file per micro-batch under its ``stateLocation``
(:mod:`~spark_stream_sched.runtime.state.batch_metrics`) and the sink one commit marker per
micro-batch under its own (:mod:`~spark_stream_sched.runtime.state.commit_log`). The functions
here read them — after a query, or while it runs — and, given Spark's progress of the same query
(``query.recentProgress``, which a Spark Connect client fetches from the server), add Spark's
figures of each batch::

    query = (spark.readStream.format("ordered-agg").options(**opts).load()
             .writeStream.format("parquet")...trigger(availableNow=True).start())
    query.awaitTermination()
    for batch in source_progress(opts["stateLocation"], query.recentProgress):
        print(format_line(batch))

Unlike :class:`~spark_stream_sched.spark.metrics.OrderedAggProgress` (a
``StreamingQueryListener``, whose events arrive asynchronously), nothing here waits for an event:
once ``awaitTermination()`` has returned, every batch's files are complete. The files must be
readable where this runs: on the driver's machine, on the machine of a Spark Connect server, or
on a file system they share with the client (docs/connect.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from spark_stream_sched.figures import (
    ordered_figures,
    progress_dict,
    sink_figures,
    source_figures,
)
from spark_stream_sched.inputs.offsets import FORMAT, parse_offset, version_id
from spark_stream_sched.runtime.state import batch_metrics, commit_log
from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.owner import SINK, read_owner

#: Commit-marker fields that are the sink's bookkeeping, not progress (schema, file names, ...).
_SINK_INTERNAL = ("checksum", "fingerprint", "format_version", "groups", "last_rows_at", "schema",
                  "ts_is_timestamp", "version")


def source_progress(state_location: str, spark_progress: Iterable[Any] = (),
                    after: int | None = None) -> list[dict[str, Any]]:
    """The ``ordered-agg`` source's figures of every kept batch, in batch order.

    Parameters
    ----------
    state_location
        The source's ``stateLocation`` option.
    spark_progress
        Spark's ``StreamingQueryProgress`` objects of the same query (``query.recentProgress``,
        or events a listener collected); a batch whose Spark progress has this source's end
        offset gets ``query_name``, ``spark_input_rows`` (``numInputRows``: the windows the
        source emitted) and ``spark_trigger_ms``. Progress of other queries is ignored.
    after
        Only batches with a larger batch id (to follow a running query).

    Returns
    -------
    list of dict
        One dict per batch (keys in docs/monitoring.md); the last batch of a finished
        ``Trigger.AvailableNow`` run is included although Spark has not committed it yet.
    """
    spark = {version: p for p in spark_progress for version in source_versions(p)}
    batches = [source_figures(b) for b in batch_metrics.read_batches(state_location)
               if after is None or b["batch_id"] > after]
    for batch in batches:
        progress = spark.get(batch["version"])
        if progress is not None and progress.batchId == batch["batch_id"]:
            batch.update(spark_figures(progress))
    return batches


def sink_progress(state_location: str, spark_progress: Iterable[Any] = (),
                  after: int | None = None) -> list[dict[str, Any]]:
    """The ``ordered-agg`` sink's committed batches, in commit order (``final`` last).

    Parameters
    ----------
    state_location
        The sink's ``stateLocation`` option (default ``<checkpointLocation>/ordered-agg-sink``).
    spark_progress
        Spark's ``StreamingQueryProgress`` objects of the query; those whose query id is the
        one the sink recorded add Spark's figures of their batch, as in
        :func:`source_progress`.
    after
        Only batches with a larger batch id (``final`` counts as the last batch id + 1).

    Returns
    -------
    list of dict
        Per committed batch: ``batch_id`` (an int, or ``"final"`` for :func:`finish_sink
        <spark_stream_sched.spark.sink.finish_sink>`), ``rows_in``, ``rows_out``, ``output``
        (the Parquet file written, or None), ``ready_bound``, ``input_max``, ``finished``,
        ``dropped``, and where the work ran (``tasks``, ``groups_on_driver``, ...).
    """
    owner = _sink_query_id(state_location)
    spark = {p.batchId: p for p in spark_progress if owner is not None and str(p.id) == owner}
    out = []
    for record in sink_figures(commit_log.read_markers(state_location)):
        if after is not None and int(record.get("order", 0)) <= after:
            continue
        figures = {k: v for k, v in record.items() if k not in _SINK_INTERNAL}
        progress = spark.get(record["batch_id"])
        if progress is not None:
            figures.update(spark_figures(progress))
        out.append(figures)
    return out


def ordered_progress(spark_progress: Iterable[Any], after: int | None = None
                     ) -> list[dict[str, Any]]:
    """An ``ordered()`` query's figures of every batch, from Spark's progress of it.

    ``ordered()`` runs inside Spark's stateful operator, so its figures are in Spark's
    ``StreamingQueryProgress`` (``query.recentProgress``, or the dicts of their JSON a listener
    logged); :func:`~spark_stream_sched.figures.ordered_figures` reads them. ``after``: only
    batches with a larger batch id.
    """
    return [b for b in ordered_figures(spark_progress)
            if after is None or int(b["batch_id"]) > after]


def save_progress(spark_progress: Iterable[Any], path: str) -> int:
    """Write Spark's progress of a query to ``path``, one JSON object a line; return how many.

    ``spark_progress``: ``query.recentProgress`` (Spark keeps the last
    ``spark.sql.streaming.numRecentProgressUpdates``, 100 by default) or progress a listener
    collected. ``spark-stream-sched report <path>`` draws an ``ordered()`` query's batches from
    it. The file is replaced whole (written beside it, then renamed).
    """
    lines = [json.dumps(progress_dict(p), sort_keys=True) + "\n" for p in spark_progress]
    atomic_write(path, "".join(lines).encode())
    return len(lines)


def batches(location: str) -> list[dict[str, Any]]:
    """Every recorded batch under a source's or a sink's state location, in batch order.

    The records have the common fields of :mod:`spark_stream_sched.figures` (and the door's
    own); [] when nothing has run there.
    """
    if read_owner(location, SINK) is not None or commit_log.read_markers(location):
        return sink_progress(location)
    return source_progress(location)


def source_versions(progress: Any) -> list[str]:
    """State versions at the end offsets of the ``ordered-agg`` sources of ``progress``.

    A query may read several ``ordered-agg`` sources (each with its own ``stateLocation``);
    the version tells which of them a metrics file belongs to.
    """
    versions = []
    for source in progress.sources:
        try:
            raw = json.loads(source.endOffset or "null")
        except ValueError:
            continue
        if isinstance(raw, dict) and raw.get("format") == FORMAT:
            versions.append(version_id(parse_offset(raw, len(raw.get("inputs") or []))))
    return versions


def spark_figures(progress: Any) -> dict[str, Any]:
    """Spark's figures of one batch: query name, input rows, trigger time (ms)."""
    return {"query_name": progress.name, "spark_input_rows": progress.numInputRows,
            "spark_trigger_ms": progress.durationMs.get("triggerExecution")}


def _sink_query_id(state_location: str) -> str | None:
    """The Spark query id the sink recorded as the owner of ``state_location`` (None: none)."""
    owner = read_owner(state_location, SINK)
    value = None if owner is None else owner.get("query_id")
    return value if isinstance(value, str) else None


def format_line(figures: dict[str, Any]) -> str:
    """One log line of a batch's figures (any door's record, :mod:`~spark_stream_sched.figures`)."""
    lag, state, seconds = figures.get("lag_ms"), figures.get("state_bytes"), figures.get(
        "batch_seconds")
    return (f"ordered-agg {figures.get('door', 'source')} batch {figures['batch_id']}: "
            f"{int(figures.get('rows_in') or 0):,} rows in, "
            f"{int(figures.get('windows_out') or 0):,} windows out, "
            f"{int(figures.get('late_dropped') or 0):,} late dropped, "
            f"state {'-' if state is None else f'{state:,} B'}, "
            f"lag {'-' if lag is None else f'{lag:,} ms'}, "
            f"{'-' if seconds is None else f'{seconds:.2f}'} s" + _join_part(figures))


def _join_part(figures: dict[str, Any]) -> str:
    """``, join: ...`` when the batch's joins pushed state or cleaned up (else empty)."""
    pushed = int(figures.get("join_pushed_bytes") or 0) + int(
        figures.get("join_held_pushed_bytes") or 0)
    results = int(figures.get("join_cleanup_results") or 0)
    if not (pushed or results or figures.get("join_cleanups")):
        return ""
    return (f", join: {results:,} clean-up results in "
            f"{float(figures.get('join_cleanup_seconds') or 0.0):.2f} s, {pushed:,} B pushed")
