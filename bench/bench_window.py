"""Window aggregation benchmark (Gulisano et al. 2016, Table 2 queries) vs the MQ baseline.

A thin wrapper over :mod:`spark_stream_sched.bench.window`: import it and call ``run(...)``
(returns one result dict per query), or run it as a script with the flags of
``spark-stream-sched bench window``::

    python bench/bench_window.py --rows 1000000 --baseline-rows 50000 --queries k-OS,K-OI
"""

from __future__ import annotations

import sys

from spark_stream_sched.bench.window import QUERY_NAMES, format_results, run
from spark_stream_sched.cli import main

__all__ = ["QUERY_NAMES", "format_results", "run"]

if __name__ == "__main__":
    sys.exit(main(["bench", "window", *sys.argv[1:]]))
