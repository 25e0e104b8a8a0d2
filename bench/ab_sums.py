"""A/B cost of floating sums between two source trees (e.g. before and after exact sums).

Each workload runs in its own process (best of 3 inside it), the two trees interleaved, so that
both see the same machine; the table gives medians and minima over the repetitions::

    git -C . archive main | tar -x -C /tmp/a ; git -C . archive HEAD | tar -x -C /tmp/b
    .venv/bin/python bench/ab_sums.py /tmp/a /tmp/b --reps 7

Workloads: 1 M smart-grid rows over 8 inputs fed in 65 536-row packets to window queries with
``avg``/``sum`` (dense path, and the sparse path forced), a ``count(*)`` control, the keyed
``running(sum(value))`` operator and the threaded executor's ``running_sum``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

ROWS, BATCH = 1_000_000, 65_536
#: name -> (window size s, slide s, aggregates) of the window workloads.
WINDOWS = {
    "w-OI avg 20s/2s": (20, 2, ("avg(value) as mean",)),
    "W-OI avg 40s/2s": (40, 2, ("avg(value) as mean",)),
    "sg-sliding count+avg+first 30s/3s": (30, 3, ("count(*) as n", "avg(value) as mean",
                                                  "first(value) as first_value")),
    "sum+avg 30s/3s": (30, 3, ("sum(value) as s", "avg(value) as a")),
    "sum tumbling 10s": (10, 10, ("sum(value) as s",)),
    "count only (control)": (30, 3, ("count(*) as n",)),
}
OTHERS = ("sum+avg 30s/3s sparse path", "running(sum(value)) by meter",
          "executor running_sum by meter")


def _workload(name: str) -> Callable[[], Any]:
    """The function that runs workload ``name`` once (data generated here, not timed)."""
    from spark_stream_sched.bench.common import feed_round_robin
    from spark_stream_sched.bench.window import Query, run_runtime
    from spark_stream_sched.data.smart_grid import smart_grid_streams
    from spark_stream_sched.runtime.executor import Engine
    from spark_stream_sched.runtime.keyed.base import build_operator
    from spark_stream_sched.runtime.keyed.stage import parse_stage
    from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan
    from spark_stream_sched.runtime.query import OrderedAggregation
    from spark_stream_sched.runtime.window import WindowAggregator, WindowSpec
    from spark_stream_sched.testing.baselines import heapq_merge

    data = smart_grid_streams(8, rows=ROWS, seed=0)
    if name in WINDOWS:
        size, slide, aggs = WINDOWS[name]
        query = Query(name, "smart_grid", size, slide, "meter", aggs)
        return lambda: run_runtime(query, data, BATCH)
    if name.endswith("sparse path"):
        spec, aggs = WindowSpec(30_000, 3_000), ["sum(value) as s", "avg(value) as a"]

        def sparse() -> Any:
            agg = OrderedAggregation(len(data), spec, ["meter"], aggs, input_schema=data[0].schema)
            agg.window = WindowAggregator(spec, ["meter"], aggs, "ts", data[0].schema, "sparse")
            return feed_round_robin(agg, data, BATCH, agg.poll)
        return sparse
    merged = heapq_merge(data)
    if name.startswith("running"):
        def running() -> None:
            op = build_operator(parse_stage("running(sum(value) as total)"), merged.schema,
                                ["meter"], "ts")
            for start in range(0, merged.num_rows, BATCH):
                op.update(merged.slice(start, BATCH), None)
        return running
    plan = QueryPlan([OperatorDef("r", OperatorKind.KEYED, ("s",), params={
        "keys": ["meter"], "function": "running_sum", "column": "value"})])
    return lambda: Engine(plan).run({"s": merged.select(["ts", "meter", "value"])}, timeout=600)


def work(name: str) -> None:
    """Print the best of 3 timings of workload ``name`` as JSON (run in a child process)."""
    import spark_stream_sched

    run, best = _workload(name), float("inf")
    for _ in range(3):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"src": os.path.dirname(spark_stream_sched.__file__), "seconds": best}))


def drive(trees: dict[str, str], reps: int) -> dict[str, dict[str, list[float]]]:
    """Timings per tree and workload: ``reps`` child processes each, trees interleaved."""
    times: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    for rep in range(reps):
        for w, name in enumerate([*WINDOWS, *OTHERS]):
            order = list(trees.items()) if (rep + w) % 2 == 0 else list(trees.items())[::-1]
            for tree, src in order:
                done = subprocess.run([sys.executable, __file__, "--work", name],
                                      env={**os.environ, "PYTHONPATH": src}, check=True,
                                      capture_output=True, text=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                if not got["src"].startswith(src):
                    raise RuntimeError(f"{tree} ran {got['src']}, not {src}")
                times[tree].setdefault(name, []).append(got["seconds"])
        print(f"repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return times


def main() -> None:
    """Command line: ``ab_sums.py A_SRC B_SRC [--reps N]`` (or ``--work NAME``, internal)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", help="source trees A and B (each holds the package)")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.work:
        work(args.work)
        return
    if len(args.trees) != 2:
        parser.error("give two source trees, A (before) and B (after)")
    times = drive({"A": args.trees[0], "B": args.trees[1]}, args.reps)
    print(f"{'workload':38s} {'A median':>9s} {'B median':>9s} {'B/A':>5s} "
          f"{'A min':>7s} {'B min':>7s} {'B/A':>5s}")
    for name, a in times["A"].items():
        b = times["B"][name]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{name:38s} {ma:9.3f} {mb:9.3f} {mb / ma:5.2f} "
              f"{min(a):7.3f} {min(b):7.3f} {min(b) / min(a):5.2f}")


if __name__ == "__main__":
    main()
