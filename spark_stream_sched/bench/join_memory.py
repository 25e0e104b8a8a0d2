"""``bench join-memory``: peak memory of the runtime's join with and without a memory budget.

The case: two inputs of ``--rows`` tuples each (one per ms), an **unwindowed** 2-way join on an
int64 key drawn uniformly from ``rows / --ratio`` values (about ``--ratio * rows`` results),
fed micro-batch by micro-batch (``--batch-rows`` merged tuples, each with the ready bound the
next batch proves), then :meth:`~..runtime.keyed.join.Join.finish`, the clean-up stage (Liu &
Rundensteiner, *Adapting State-Intensive Non-Blocking Queries over Distributed Environments*,
§4.2). Unwindowed, nothing is purged: without a budget the whole state stays in memory; with
``budget=B`` the join pushes partition groups to disk and cleans them up at the end. ``--finish``
takes the end-of-input results as :meth:`~..runtime.keyed.join.Join.finish`'s one table
(``table``, what a query does) and/or part by part from ``finish_parts`` (``parts``, each part
dropped once counted); the join's own accounting of its peak (``stats["peak_bytes"]``) is
reported next to the RSS.

Each configuration (``--budgets``, ``none`` for no budget) runs in its **own subprocess**
(``python -m spark_stream_sched.bench.join_memory --child ...``), so one run's freed memory
cannot hide another's peak. Inside it, after the inputs are generated, the kernel's peak-RSS
mark is reset (``/proc/self/clear_refs``) and read from ``/proc/self/status`` (``VmHWM``)
before and after :meth:`finish`: the peak of the normal run and of the clean-up, next to the
RSS with only the inputs loaded. Where the mark cannot be reset, ``resource.getrusage``'s
``ru_maxrss`` gives one peak for the whole process (``reset: false`` in the results).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

from spark_stream_sched.bench.adaptation_data import merged
from spark_stream_sched.bench.common import format_table, progress
from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.durations import parse_bytes

Results = list[dict[str, Any]]
MB = 1 << 20
DEFAULT_BUDGETS = "none,2m"


def add_args(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench join-memory`` (``--rows``: tuples per input, default 1,500,000)."""
    parser.add_argument("--budgets", default=DEFAULT_BUDGETS,
                        help=f"comma-separated budgets, 'none' for none (default "
                             f"{DEFAULT_BUDGETS})")
    parser.add_argument("--ratio", type=float, default=0.3,
                        help="results per input tuple (sets the key domain; default 0.3)")
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="merged tuples per micro-batch (default 65536; quick 4096)")
    parser.add_argument("--spill-dir", default=None, help="parent of the spill directory")
    parser.add_argument("--finish", default="table",
                        help="comma-separated ways to take the end-of-input results: 'table' "
                             "(Join.finish, one table, as a query does) and/or 'parts' "
                             "(Join.finish_parts, each part dropped once counted; default table)")


def _budgets(text: str) -> list[int | None]:
    """``"none,2m"`` -> ``[None, 2097152]`` (ConfigError naming a bad entry)."""
    out: list[int | None] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        out.append(None if item.lower() == "none" else parse_bytes(item))
    if not out:
        raise ConfigError("--budgets names no budget; e.g. --budgets none,2m")
    return out


def run_cli(args: argparse.Namespace) -> Results:
    """Run every budget ``--repeat`` times, each run in its own subprocess."""
    rows = args.rows or (30_000 if args.quick else 1_500_000)
    args.batch_rows = args.batch_rows or (4096 if args.quick else 65_536)
    if not 0 < args.ratio <= 100 or args.batch_rows < 1:
        raise ConfigError(f"--ratio must be in (0, 100] and --batch-rows >= 1; got "
                          f"{args.ratio}, {args.batch_rows}")
    budgets, repeat = _budgets(args.budgets), args.repeat or 1
    ways = [w.strip() for w in args.finish.split(",") if w.strip()]
    if not ways or set(ways) - {"table", "parts"}:
        raise ConfigError(f"--finish takes 'table' and/or 'parts', got {args.finish!r}")
    results: Results = []
    configs = [(b, w) for b in budgets for w in (ways if b is not None else ways[:1])]
    with progress(len(configs) * repeat, "bench join-memory", not args.no_progress) as bar:
        for budget, way in configs:
            runs = []
            for _ in range(repeat):
                runs.append(_child(rows, budget, way, args))
                bar.update(1)
            results.append(_summary(runs))
    return results


def _child(rows: int, budget: int | None, way: str, args: argparse.Namespace
           ) -> dict[str, Any]:
    """One configuration in a fresh interpreter; its JSON line."""
    command = [sys.executable, "-m", "spark_stream_sched.bench.join_memory", "--child",
               "--rows", str(rows), "--ratio", str(args.ratio), "--batch-rows",
               str(args.batch_rows), "--seed", str(args.seed), "--finish", way,
               "--budget", "none" if budget is None else str(budget)]
    if args.spill_dir:
        command += ["--spill-dir", args.spill_dir]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench join-memory child failed ({done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the figures of repeated runs (counts must agree)."""
    if len({(r["results"], r["cleanup_results"]) for r in runs}) != 1:
        raise RuntimeError(f"repeated runs gave different results: {runs}")
    out = dict(runs[0])
    for name in ("peak_mb", "normal_peak_mb", "cleanup_peak_mb", "inputs_mb", "normal_s",
                 "cleanup_s", "total_s"):
        out[name] = statistics.median(r[name] for r in runs)
    out["runs"] = len(runs)
    return out


COLUMNS = [("budget", "budget"), ("finish", "finish"), ("peak_mb", "peak RSS MiB"),
           ("inputs_mb", "inputs RSS MiB"),
           ("normal_peak_mb", "normal-run peak"), ("cleanup_peak_mb", "clean-up peak"),
           ("pushed_mb", "pushed MiB"), ("held_peak_mb", "join's peak MiB"),
           ("output_mb", "finish() output MiB"),
           ("results", "results"),
           ("cleanup_results", "clean-up results"), ("normal_s", "normal s"),
           ("cleanup_s", "clean-up s"), ("total_s", "total s"), ("reset", "peak reset")]


def format_results(results: Results) -> str:
    """One table; the case in its title."""
    if not results:
        return "(no runs)"
    r = results[0]
    title = (f"unwindowed 2-way join, 2 x {r['rows']:,} tuples, {r['keys']:,} keys, "
             f"{r['batch_rows']:,}-tuple micro-batches; each run in its own process")
    return f"{title}\n{format_table(results, COLUMNS)}"


def register(bench: Any) -> Any:
    """Return the ``BENCHES`` entry; ``bench`` is the CLI's ``Bench`` record type."""
    return bench("peak RSS of the runtime's unwindowed 2-way join with and without a memory "
                 "budget, each configuration in its own process", add_args, run_cli,
                 format_results)


# -- the child process ------------------------------------------------------------------------

def _status_kb(field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of this process in KiB (0 if /proc is not there)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return _status_kb("VmHWM") > 0
    except OSError:
        return False


def _peak_kb(reset: bool) -> int:
    """Peak RSS since the last reset (or of the whole process) in KiB."""
    return _status_kb("VmHWM") if reset else int(resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss)


def _pushes(op: Any) -> int:
    """Generations the join wrote (``Join.stats``; before it existed, ``Join.pushes``)."""
    stats = getattr(op, "stats", None)
    return int(stats["pushes"]) if stats else int(op.pushes)


def _shown(budget: int | None) -> str:
    """A budget as written in tables: ``none``, ``64 KiB``, ``2 MiB``."""
    if budget is None:
        return "none"
    return f"{budget / MB:g} MiB" if budget >= MB else f"{budget / 1024:g} KiB"


def child_run(rows: int, ratio: float, batch_rows: int, seed: int, budget: int | None,
              spill_dir: str | None, way: str = "table") -> dict[str, Any]:
    """Generate the inputs, run the join, measure (see the module docstring).

    ``way``: ``table`` takes :meth:`Join.finish`'s one table, ``parts`` the parts of
    :meth:`Join.finish_parts`, each dropped once counted (a consumer that streams them on).
    """
    from spark_stream_sched.bench.adaptation_data import make_join

    keys = max(1, round(rows / ratio))
    table = merged(np.random.default_rng(seed).integers(0, keys, (rows, 2), dtype=np.int64))
    ts = np.asarray(table.column("ts").to_numpy())
    with tempfile.TemporaryDirectory(dir=spill_dir) as root:
        op = make_join(16, 2, spill_dir=root, memory_budget=budget)
        op.ordered = True  # the default of a query's join: output in the total order
        inputs_kb, reset = _status_kb("VmRSS"), _reset_peak()
        start, produced = time.perf_counter(), 0
        for lo in range(0, table.num_rows, batch_rows):
            bound = int(ts[lo + batch_rows]) if lo + batch_rows < len(ts) else None
            produced += op.update(table.slice(lo, batch_rows), bound).num_rows
        normal_s, normal_kb = time.perf_counter() - start, _peak_kb(reset)
        reset = reset and _reset_peak()
        cleanup_results, output_bytes = _finish(op, way)
        cleanup_s, cleanup_kb = time.perf_counter() - start - normal_s, _peak_kb(reset)
        stats = dict(getattr(op, "stats", {}))
        op.close()
    return {"rows": rows, "keys": keys, "batch_rows": batch_rows, "finish": way,
            "budget": _shown(budget), "budget_bytes": budget,
            "held_peak_mb": stats.get("peak_bytes", 0) / MB,
            "inputs_mb": inputs_kb / 1024, "normal_peak_mb": normal_kb / 1024,
            "cleanup_peak_mb": cleanup_kb / 1024,
            "peak_mb": max(normal_kb, cleanup_kb) / 1024,
            "pushed_mb": stats.get("pushed_bytes", 0) / MB, "pushes": _pushes(op),
            "output_mb": output_bytes / MB,
            "results": produced + cleanup_results, "cleanup_results": cleanup_results,
            "normal_s": normal_s, "cleanup_s": cleanup_s, "total_s": normal_s + cleanup_s,
            "reset": reset, "stats": stats}


def _finish(op: Any, way: str) -> tuple[int, int]:
    """Results and bytes the end of input returns, taken ``way`` (``table`` or ``parts``)."""
    if way == "table":
        out = op.finish()
        return out.num_rows, out.nbytes
    rows = size = 0
    for part in op.finish_parts():
        rows, size = rows + part.num_rows, size + part.nbytes
    return rows, size


def main(argv: list[str] | None = None) -> int:
    """Entry point of a child run: one JSON line on stdout."""
    parser = argparse.ArgumentParser(prog="join_memory --child")
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--ratio", type=float, required=True)
    parser.add_argument("--batch-rows", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", required=True)
    parser.add_argument("--spill-dir", default=None)
    parser.add_argument("--finish", choices=("table", "parts"), default="table")
    a = parser.parse_args(argv)
    budget = None if a.budget == "none" else int(a.budget)
    result = child_run(a.rows, a.ratio, a.batch_rows, a.seed, budget, a.spill_dir, a.finish)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
