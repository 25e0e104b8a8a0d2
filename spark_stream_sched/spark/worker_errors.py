"""Our errors raised inside Spark's Python workers reach the user with our message first.

Spark reports an exception raised in one of its Python workers — the driver-side planner
workers (``schema()``, ``reader()``, ``streamReader()``, ``streamWriter()``), the long-lived
streaming source runner (``latestOffset``, ``partitions``, ``commit``, ...), the sink's commit
runner (the writer's ``commit`` and ``abort``) and the executors' task workers (``read()``,
``write()``) — as the worker's formatted traceback, 11–45 lines with the message
last, unless ``SPARK_HIDE_TRACEBACK`` is set (``pyspark.util.handle_worker_exception``). For an
error this package raises on purpose the message already names what failed, where and what to
do, so the traceback only hides it: Spark's first line then ends with
``spark_stream_sched.errors.InputError: <our message>``.

Every one of those workers exits right after reporting an exception (``sys.exit(-1)`` in
pyspark 4.3's ``worker.py``, ``python_streaming_source_runner.py``,
``python_streaming_sink_runner.py`` and the planner workers), so
setting the variable there affects nothing else. Outside a Spark worker (tests, the CLI's
runtime path) nothing is changed, and any other exception keeps its traceback: an unexpected
error needs it.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark_stream_sched.errors import SparkStreamSchedError
from spark_stream_sched.spark.compat import ReadLimit, SupportsTriggerAvailableNow

F = TypeVar("F", bound=Callable[..., Any])


def in_spark_worker() -> bool:
    """Whether this process is one of Spark's Python workers (its ``__main__`` is pyspark's)."""
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    return main is not None and str(main.name).startswith("pyspark.")


@contextmanager
def plain_errors() -> Iterator[None]:
    """Report a :class:`SparkStreamSchedError` raised inside without the worker's traceback."""
    try:
        yield
    except SparkStreamSchedError:
        if in_spark_worker():
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
        raise


def reported(method: F) -> F:
    """Decorate a data source method (a generator too) to run under :func:`plain_errors`."""
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def generator(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with plain_errors():
                yield from method(*args, **kwargs)

        return generator  # type: ignore[return-value]

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with plain_errors():
            return method(*args, **kwargs)

    return call  # type: ignore[return-value]


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stands in for a stream reader that could not be created; its first driver call raises.

    pyspark 4.3's streaming source runner calls ``DataSource.streamReader()`` inside a ``try``
    whose ``finally`` calls ``reader.stop()``: an exception raised by ``streamReader()`` meets an
    unbound ``reader`` there and reaches the user as ``UnboundLocalError: cannot access local
    variable 'reader'``, hiding the real error. ``streamReader()`` therefore returns this
    object, and the error is raised, with our message first, by the runner's next call
    (``prepareForTriggerAvailableNow``, ``initialOffset`` or ``latestOffset``) — still on the
    driver, before any data moves.

    Notes
    -----
    Must be picklable (Spark's planner worker pickles the reader); it holds only the error.
    """

    def __init__(self, error: SparkStreamSchedError) -> None:
        self._error = error

    def _refuse(self) -> NoReturn:
        with plain_errors():
            raise self._error

    def initialOffset(self) -> dict[str, Any]:
        """Raise the error found when the reader was created."""
        self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Raise the error found when the reader was created."""
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Raise the error found when the reader was created."""
        self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        """Raise the error found when the reader was created."""
        self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Raise the error found when the reader was created."""
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Raise the error found when the reader was created."""
        self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        """Raise the error found when the reader was created."""
        self._refuse()

    def stop(self) -> None:
        """Nothing to release."""
