"""Jobs described by TOML configs: the spark-submit script and the logic it shares with the CLI.

* :mod:`.config` -- ``JobConfig`` parsed from ``conf/<job>.toml``;
* :mod:`.runner` -- generate inputs, run the query (source, sink or runtime engine);
* :mod:`.results` -- read outputs back, print tables and summaries;
* the embedded local Spark (environment, quiet settings): :mod:`spark_stream_sched.spark.embedded`;
* ``ordered_agg_job.py`` -- the script for ``spark-submit``.
"""
