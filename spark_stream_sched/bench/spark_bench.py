"""``bench spark``: the main case, the long case, the cores case, the cluster point, the model.

Each case prepares its data once, then runs every engine (:func:`.spark_native.run_engine`) in
turn; the cores case runs the engines it scales in processes of their own, one per
``local[n]``, and the cluster point the engines of ours that scale on a running standalone
master (:mod:`.spark_scaling`); the model (:mod:`.spark_model`) projects the ``local[1]`` runs
to more cores and compares the projection with the measured points.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from spark_stream_sched.bench.spark_cases import ENGINES, Record
from spark_stream_sched.bench.spark_model import PROJECT_CORES
from spark_stream_sched.bench.spark_native import LONG_ENGINES, run_engine


def run(rows: int = 2_000_000, n_inputs: int = 8, keys: int = 1000, size: str = "30 seconds",
        slide: str = "3 seconds", watermark: str = "10 seconds", runs: int = 3,
        batchings: tuple[int, int] = (4, 1), seed: int = 0, workdir: str | None = None,
        master: str = "local[*]", show_progress: bool = True,
        engines: Sequence[str] = ENGINES, long_rows: int = 0,
        cores: Sequence[int] = (1, 2), warmup: int = 1, cluster: str | None = None,
        cluster_cores: int = 2, project: Sequence[int] = PROJECT_CORES,
        partitions: int | None = None) -> list[Record]:
    """Run the main, long, cores and cluster cases, then the model.

    The long case runs when ``long_rows`` > 0, the cores case for ``cores``, the cluster point
    when ``cluster`` names a standalone master URL giving ``cluster_cores`` cores.
    ``batchings`` are files per input per micro-batch (A, B); the source gets as many rows as
    ``maxRecordsPerTrigger``, the floors replay its batching-A micro-batches. The long case runs
    :data:`LONG_ENGINES` with the source's default ``Trigger.AvailableNow`` sizing. Every case
    starts with ``warmup`` untimed rounds. The model's rows (projections to ``project`` cores
    and checks against the measured points) come last. ``partitions``: the source's tasks.
    """
    from spark_stream_sched.bench.common import progress
    from spark_stream_sched.bench.spark_cases import Case, prepare, run_case
    from spark_stream_sched.bench.spark_model import model_rows
    from spark_stream_sched.bench.spark_scaling import (
        CLUSTER_ENGINES,
        SCALING_ENGINES,
        run_cluster,
        run_scaling,
    )
    from spark_stream_sched.bench.spark_stages import SETTINGS
    from spark_stream_sched.spark import embedded

    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sss-bench-spark-"))
    main_case = Case("main", root / "main", tuple(engines), runs, batchings, warmup)
    long_case = Case("long", root / "long", tuple(e for e in LONG_ENGINES if e in engines),
                     runs, None, warmup)
    scaled = [e for e in SCALING_ENGINES if e in engines]
    clustered = [e for e in CLUSTER_ENGINES if e in engines] if cluster else []
    total = (len(main_case.plan()) + (len(long_case.plan()) if long_rows else 0)
             + (len(cores) * len(scaled) + len(clustered)) * (warmup + runs))
    try:
        spark = embedded.get_spark(master=master, settings=SETTINGS)
        engine = functools.partial(run_engine, spark)
        query = (n_inputs, keys, seed, size, slide, watermark, partitions)  # both cases'
        with progress(total, "bench spark", show_progress) as bar:
            work, truth, oracle = prepare(main_case, rows, *query)
            results = run_case(main_case, work, truth, oracle, engine, bar)
            if long_rows and long_case.engines:
                long_work, long_truth, long_oracle = prepare(long_case, long_rows, *query)
                results += run_case(long_case, long_work, long_truth, long_oracle, engine,
                                    bar)
            if cores and scaled:
                results += run_scaling(root / "cores", work, truth, scaled, cores, runs,
                                       batchings[0], bar, warmup)
            if cluster and clustered:
                results += run_cluster(root, work, truth, clustered, cluster, cluster_cores,
                                       runs, batchings[0], bar, warmup)
        return results + model_rows(results, project)
    finally:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
