"""Spark adapter: the only package that imports pyspark (options, offsets, source, sink).

Importing this package does not import pyspark; :func:`session`, :func:`register`,
``spark.source`` and the transformation (``ordered``, ``configure``, imported on first use from
:mod:`~spark_stream_sched.spark.transform`) do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Names served lazily from :mod:`spark_stream_sched.spark.transform`.
_TRANSFORM = ("ordered", "configure")


def __getattr__(name: str) -> Any:
    """``ordered`` and ``configure`` (the streaming transformation), imported on first use."""
    if name in _TRANSFORM:
        from spark_stream_sched.spark import transform

        return getattr(transform, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def session(master: str | None = "local[*]", app_name: str = "spark-stream-sched",
            **conf: str) -> SparkSession:
    """Start a SparkSession ready for ``format("ordered-agg")`` from any Python interpreter.

    Spark's Python workers run ``python3`` from ``PATH`` unless told otherwise; from a plain
    ``.venv/bin/python script.py`` (virtual environment not activated) that interpreter lacks
    this package and ``load()`` fails with ``DATA_SOURCE_NOT_FOUND``. This helper sets
    ``spark.pyspark.python`` / ``spark.pyspark.driver.python`` (and ``PYSPARK_PYTHON``) to the
    running interpreter, binds to loopback, and registers the format.

    Parameters
    ----------
    master:
        Master URL (``None``: whatever ``spark-submit`` configured).
    app_name:
        The application name.
    **conf:
        More Spark settings; use the dotted names as keys, e.g.
        ``session(**{"spark.sql.shuffle.partitions": "4"})``.

    Notes
    -----
    Must be called before any other SparkSession starts in this process. On a cluster the
    package must be installed for the same interpreter path on every worker.
    """
    from spark_stream_sched.spark.embedded import build_session

    spark: SparkSession = build_session(master, app_name, tuple(conf.items()))
    return spark


def register(spark: SparkSession) -> None:
    """Make ``format("ordered-agg")`` (source, sink and batch reads) available in ``spark``.

    The one registration function. With the package installed, pyspark registers
    ``DefaultSource`` of the top-level module ``pyspark_ordered_agg`` by itself, and this does
    nothing (registering again makes Spark warn that a static registration was replaced);
    otherwise -- not installed, or shipped in a zip with ``--py-files``, which pyspark's lookup
    does not read -- it registers
    :class:`~spark_stream_sched.spark.datasource.OrderedAggDataSource`.

    On a local master it first checks that Spark's Python workers can import the package, and
    otherwise raises a ``ConfigError`` naming their interpreter and the fix
    (:func:`~spark_stream_sched.spark.embedded.check_workers_python`).

    Notes
    -----
    Over Spark Connect the format runs in the server's Python, which finds ``pyspark_ordered_agg``
    there by itself; this checks only the client's installation (docs/connect.md).
    """
    import importlib.util
    import zipimport

    from spark_stream_sched.spark.embedded import check_workers_python

    check_workers_python(spark)
    installed = importlib.util.find_spec("pyspark_ordered_agg")
    if installed is not None and not isinstance(installed.loader, zipimport.zipimporter):
        return  # pyspark's lookup finds it; a module in a shipped zip it does not
    from spark_stream_sched.spark.datasource import OrderedAggDataSource

    spark.dataSource.register(OrderedAggDataSource)
