"""The source's per-batch figures next to Spark's progress: a ``StreamingQueryListener`` helper.

pyspark 4.3's Python streaming source API cannot add metrics to ``StreamingQueryProgress``:
``DataSourceStreamReader`` has no metrics method, its driver-side runner
(``pyspark/sql/streaming/python_streaming_source_runner.py``) serves only offsets, partitions,
commit, read limits and ``prepareForTriggerAvailableNow``, and the JVM side
(``PythonMicroBatchStream``) does not implement ``ReportsSourceMetrics`` — so
``progress.sources[0].metrics`` stays ``{}`` and ``numInputRows`` counts the rows ``read()``
yields, i.e. output windows. The source therefore writes one metrics file per batch under its
``stateLocation`` (``runtime/state/batch_metrics.py``) and :class:`OrderedAggProgress` reads it
on every progress event::

    with OrderedAggProgress(spark, "/state/q1") as progress:   # before start()
        query = df.writeStream...trigger(availableNow=True).start()
        query.awaitTermination()
    progress.latest   # {"batch_id": 3, "rows_in": ..., "lag_ms": ..., "state_bytes": ...}

Spark delivers listener events asynchronously, on its listener-bus thread. Leaving the ``with``
block (or :meth:`OrderedAggProgress.remove`) waits until Spark's listener bus has delivered
every event posted so far, then removes the listener: removing it while an event is still on
its way — or letting the interpreter exit then — makes Spark log a ``Py4JNetworkException ...
onQueryProgress`` traceback. An ``atexit`` hook does the same for a listener that was never
removed.

Over Spark Connect (pyspark 4.3) the listener runs in the client: the server streams its
listener events to a client-side bus (``pyspark/sql/connect/streaming/query.py``,
``StreamingQueryListenerBus``). The metrics files must then be readable by the client, and
nothing can wait for the server's bus, so the last events may arrive after
``awaitTermination()`` returned. :mod:`spark_stream_sched.progress` reads the same figures
without a listener (docs/connect.md).
"""

from __future__ import annotations

import atexit
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from spark_stream_sched.errors import SparkStreamSchedError
from spark_stream_sched.figures import source_figures
from spark_stream_sched.progress import format_line, source_versions, spark_figures
from spark_stream_sched.runtime.state import batch_metrics

log = logging.getLogger(__name__)

#: Batches whose figures :attr:`OrderedAggProgress.history` keeps.
HISTORY = 1000


def drain_listener_bus(spark: Any, timeout_s: float = 30.0) -> bool:
    """Wait until Spark's listener bus has delivered every event posted so far.

    Returns False when it did not within ``timeout_s`` (logged), and True at once when the
    session is stopped or is a Spark Connect session (no local bus).

    Notes
    -----
    Called on the driver, never from a listener callback (it would wait for itself).
    """
    from py4j.protocol import Py4JError

    context = getattr(spark, "sparkContext", None)
    jsc = getattr(context, "_jsc", None) if context is not None else None
    if jsc is None:
        return True
    try:
        jsc.sc().listenerBus().waitUntilEmpty(int(timeout_s * 1000))
    except Py4JError as exc:
        log.warning("Spark's listener bus did not empty within %.0f s: %s", timeout_s,
                    str(exc).splitlines()[0])
        return False
    return True


def _stopped(spark: Any) -> bool:
    """True once ``spark`` is stopped (Spark Connect: its client is closed)."""
    try:
        context = spark.sparkContext
    except AttributeError:  # Spark Connect has no SparkContext (PySparkAttributeError)
        return bool(spark.is_stopped)
    return getattr(context, "_jsc", None) is None


class OrderedAggProgress:
    """Reads the ``ordered-agg`` source's metrics file of every batch Spark reports progress for.

    Parameters
    ----------
    spark
        The (classic) SparkSession the query runs in.
    state_location
        The source's ``stateLocation`` option.
    callback
        Called with each batch's figures (a dict; see docs/monitoring.md), on Spark's
        listener thread.

    Notes
    -----
    Create it on the driver before ``start()``. Each figure dict gets Spark's view of the same
    batch: ``query_name``, ``spark_input_rows`` (``numInputRows``: windows, for this source) and
    ``spark_trigger_ms``. A line per batch is logged at INFO level (logger
    ``spark_stream_sched.spark.metrics``). Progress of other queries is ignored.
    """

    def __init__(self, spark: Any, state_location: str,
                 callback: Callable[[dict[str, Any]], None] | None = None) -> None:
        from pyspark.sql.streaming.listener import StreamingQueryListener

        self.spark, self.state_location, self.callback = spark, state_location, callback
        #: Figures of the latest batch reported (None before the first).
        self.latest: dict[str, Any] | None = None
        #: Figures of the last :data:`HISTORY` batches, oldest first.
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        owner = self

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                """Nothing to report when a query starts."""

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                """Read the batch's metrics file."""
                owner.on_progress(event.progress)

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                """Nothing to report while idle."""

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                """Nothing to report at the end."""

        self._listener: Any = _Listener()
        self._added = False
        self.add()

    def add(self) -> None:
        """Register the listener with ``spark.streams`` (done by the constructor)."""
        if not self._added:
            self.spark.streams.addListener(self._listener)
            self._added = True
            atexit.register(self.remove)

    def remove(self, timeout_s: float = 30.0) -> None:
        """Wait for the events already posted to be delivered, then remove the listener."""
        if not self._added:
            return
        self._added = False
        atexit.unregister(self.remove)
        if _stopped(self.spark):
            return  # its listener bus is gone
        drain_listener_bus(self.spark, timeout_s)
        self.spark.streams.removeListener(self._listener)

    def __enter__(self) -> OrderedAggProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def on_progress(self, progress: Any) -> dict[str, Any] | None:
        """Figures of the batch ``progress`` reports, or None if it is not this source's."""
        try:
            figures = self.figures(progress)
        except (OSError, ValueError, SparkStreamSchedError) as exc:
            log.warning("cannot read the ordered-agg metrics of batch %s under %s: %s",
                        progress.batchId, self.state_location, exc)
            return None
        if figures is None:
            return None
        self.latest = figures
        self.history.append(figures)
        log.info("%s", format_line(figures))
        if self.callback is not None:
            try:
                self.callback(figures)
            except Exception:
                log.exception("the OrderedAggProgress callback failed on batch %s",
                              figures["batch_id"])
        return figures

    def figures(self, progress: Any) -> dict[str, Any] | None:
        """The merged metrics of ``progress``'s batch with Spark's figures of the same batch."""
        version = self._version(progress)
        if version is None:
            return None
        found = batch_metrics.read_batch(self.state_location, progress.batchId)
        if found is None or found.get("version") != version:  # not merged by commit() yet
            found = batch_metrics.merge_batch(self.state_location, version, progress.batchId)
        if found is None:
            return None
        return {**source_figures(found), **spark_figures(progress)}

    def _version(self, progress: Any) -> str | None:
        """State version at the end offset of this query's ordered-agg source, if any."""
        for version in source_versions(progress):
            if batch_metrics.read_parts(self.state_location, version) or (
                    batch_metrics.read_batch(self.state_location, progress.batchId)
                    or {}).get("version") == version:
                return version
        return None
