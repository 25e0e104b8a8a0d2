"""``bench spark``: run the main case, the long case and the cores case (see :mod:`.spark_native`).

Each case prepares its data once, then runs every engine (:func:`.spark_native.run_engine`) in
turn; the cores case runs the engines it scales in processes of their own
(:mod:`.spark_scaling`).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from spark_stream_sched.bench.spark_cases import ENGINES, Record
from spark_stream_sched.bench.spark_native import LONG_ENGINES, run_engine


def run(rows: int = 2_000_000, n_inputs: int = 8, keys: int = 1000, size: str = "30 seconds",
        slide: str = "3 seconds", watermark: str = "10 seconds", runs: int = 3,
        batchings: tuple[int, int] = (4, 1), seed: int = 0, workdir: str | None = None,
        master: str = "local[*]", show_progress: bool = True,
        engines: Sequence[str] = ENGINES, long_rows: int = 0,
        cores: Sequence[int] = (1, 2), warmup: int = 1) -> list[Record]:
    """Run the main case, the long case (``long_rows`` > 0) and the cores case (``cores``).

    ``batchings`` are files per input per micro-batch (A, B); the source gets as many rows as
    ``maxRecordsPerTrigger``, the floors replay its batching-A micro-batches. The long case runs
    :data:`LONG_ENGINES` with the source's default ``Trigger.AvailableNow`` sizing. Every case
    starts with ``warmup`` untimed rounds.
    """
    from spark_stream_sched.bench.common import progress
    from spark_stream_sched.bench.spark_cases import Case, prepare, run_case
    from spark_stream_sched.bench.spark_scaling import SCALING_ENGINES, run_scaling
    from spark_stream_sched.spark import embedded

    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sss-bench-spark-"))
    main_case = Case("main", root / "main", tuple(engines), runs, batchings, warmup)
    long_case = Case("long", root / "long", tuple(e for e in LONG_ENGINES if e in engines),
                     runs, None, warmup)
    scaled = [e for e in SCALING_ENGINES if e in engines]
    total = (len(main_case.plan()) + (len(long_case.plan()) if long_rows else 0)
             + len(cores) * len(scaled) * (warmup + runs))
    try:
        spark = embedded.get_spark(master=master)
        engine = functools.partial(run_engine, spark)
        with progress(total, "bench spark", show_progress) as bar:
            work, truth, oracle = prepare(main_case, rows, n_inputs, keys, seed, size, slide,
                                          watermark)
            results = run_case(main_case, work, truth, oracle, engine, bar)
            if long_rows and long_case.engines:
                long_work, long_truth, long_oracle = prepare(
                    long_case, long_rows, n_inputs, keys, seed, size, slide, watermark)
                results += run_case(long_case, long_work, long_truth, long_oracle, engine,
                                    bar)
            if cores and scaled:
                results += run_scaling(root / "cores", work, truth, scaled, cores, runs,
                                       batchings[0], bar, warmup)
        return results
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
