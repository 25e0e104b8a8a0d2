"""Options of every surface, parsed once into frozen, typed configs (no pyspark).

* :mod:`.source` -- the ``ordered-agg`` source (``spark.readStream.format(...)`` and batch
  reads): :class:`~.source.SourceConfig`
* :mod:`.sink`   -- the ``ordered-agg`` sink (``df.writeStream.format(...)``):
  :class:`~spark_stream_sched.runtime.engine.sink_config.SinkConfig`

Spark passes option keys lower-cased, so keys are matched case-insensitively; unknown keys are
refused with a suggestion. Every check runs on the driver.
"""
