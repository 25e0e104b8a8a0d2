"""Auto-registration hook: pyspark registers ``DefaultSource`` of installed ``pyspark_*`` modules.

With ``spark_stream_sched`` installed, ``spark.readStream.format("ordered-agg")`` works without
calling :func:`spark_stream_sched.spark.register`.
"""

from __future__ import annotations

from spark_stream_sched.spark.datasource import OrderedAggDataSource

DefaultSource = OrderedAggDataSource

__all__ = ["DefaultSource"]
