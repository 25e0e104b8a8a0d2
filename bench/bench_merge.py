"""S-Merge vs heapq.merge benchmark; a thin wrapper over :mod:`spark_stream_sched.bench.merge`.

Import it and call ``run(...)`` (returns one result dict per input count), or run it as a script
with the flags of ``spark-stream-sched bench merge``::

    python bench/bench_merge.py --rows 2000000 --repeat 3 [--json results.json]
"""

from __future__ import annotations

import sys

from spark_stream_sched.bench.merge import format_results, run
from spark_stream_sched.cli import main

__all__ = ["format_results", "run"]

if __name__ == "__main__":
    sys.exit(main(["bench", "merge", *sys.argv[1:]]))
