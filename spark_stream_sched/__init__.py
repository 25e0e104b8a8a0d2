"""Deterministic, ordered stream processing for Apache Spark Structured Streaming.

The package has two layers:

* :mod:`spark_stream_sched.runtime` -- the pure engine (Python, NumPy, PyArrow; never pyspark):
  S-Merge, ordered window aggregation, operators, scheduling and state.
* :mod:`spark_stream_sched.spark` -- the thin Spark adapter that registers the ``ordered-agg``
  data source and sink.
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"

from spark_stream_sched.errors import SparkStreamSchedError

__all__ = ["SparkStreamSchedError", "__version__"]
