"""Spark adapter: the only package that imports pyspark (options, offsets, source, sink).

Importing this package does not import pyspark; :func:`register` and ``spark.source`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``ordered-agg`` data source with ``spark``.

    Not needed when the package is installed: pyspark registers ``DefaultSource`` of the
    top-level module ``pyspark_ordered_agg`` automatically.
    """
    from spark_stream_sched.spark.source import OrderedAggDataSource

    spark.dataSource.register(OrderedAggDataSource)
