"""Benchmarks of the runtime against per-tuple baselines, run side by side in one process.

* :mod:`spark_stream_sched.bench.merge` -- S-Merge vs a ``heapq.merge`` k-way merge.
* :mod:`spark_stream_sched.bench.window` -- the query shapes of Gulisano et al. (2016), Table 2
  (and the
  smart-grid sliding-window query) on the runtime vs the MQ baseline (Gulisano et al. 2016, §5.3).

Each module has ``run(...) -> list[dict]`` (one result dict per case) and ``format_results``;
the ``spark-stream-sched bench`` command and the scripts in ``bench/`` call them. Rates are
tuples per second of wall-clock time, best of ``repeat`` runs; there are no pass/fail thresholds.
"""

from __future__ import annotations
