r"""``spark-stream-sched simulate``: run a plan under a scheduling strategy in the fluid model.

Example (Jiang & Chakravarthy 2003, §2.2, Table 2)::

    spark-stream-sched simulate --plan conf/sim/example_2_2_plan.json \
        --arrivals conf/sim/example_2_2_arrivals.json --strategy chain --steps 10

prints one row per time unit: arrivals, total queue size, queue memory, tuples output and their mean
latency, and the units that ran. ``--json`` prints one JSON object per line instead.
``conf/sim/bursty_16q_*.json`` hold 16 random queries on bursty self-similar input (Jiang &
Chakravarthy 2003, §5.1) for comparing strategies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan import load_plan
from spark_stream_sched.runtime.scheduler import (
    Simulator,
    StepRecord,
    get_strategy,
    load_arrivals,
    strategy_names,
)

_COLUMNS = ("time", "arrivals", "queue", "memory", "output", "latency", "units")


def register(subparsers: Any) -> None:
    """Add the ``simulate`` sub-command to ``subparsers``."""
    p = subparsers.add_parser(
        "simulate",
        help="simulate a plan under a scheduling strategy (fluid model)",
        description="Run a query plan under a scheduling strategy in the papers' fluid model "
        "(Jiang & Chakravarthy 2003, §2.2) and print queue size, memory, output and latency per "
        "time unit.",
    )
    p.add_argument("--plan", required=True, help="plan file (.json or .toml)")
    p.add_argument("--arrivals", required=True, help='arrivals file: {"stream": {"time": n}}')
    p.add_argument(
        "--strategy", required=True, help="one of: " + ", ".join(strategy_names())
    )
    p.add_argument("--steps", type=int, required=True, help="time units to simulate")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE",
        help="strategy option, e.g. gamma=0.5 or memory_limit=20 (repeatable)",
    )
    p.add_argument("--exact", action="store_true", help="exact fractions instead of floats")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings; values become int, float, bool, None or str."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param {item!r} must look like KEY=VALUE")
        params[key.strip()] = _value(text.strip())
    return params


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        with contextlib.suppress(ValueError):  # not a number of this kind: try the next
            return cast(text)
    return text


def run(args: argparse.Namespace) -> int:
    """Run the simulation described by ``args``; return the exit code."""
    if args.steps < 0:
        raise ConfigError(f"--steps must be >= 0, got {args.steps}")
    plan = load_plan(args.plan)
    arrivals = load_arrivals(args.arrivals)
    strategy = get_strategy(args.strategy, **parse_params(args.param))
    sim = Simulator(plan, strategy, arrivals, exact=args.exact)
    if args.json:
        for _ in range(args.steps):
            print(json.dumps(sim.step().to_dict(), sort_keys=True))
        return 0
    print(f"strategy {strategy.name} on {args.plan}")
    print(_row(_COLUMNS))
    for _ in range(args.steps):
        print(_row(_cells(sim.step())))
    return 0


def _cells(r: StepRecord) -> tuple[str, ...]:
    latency = "-" if r.latency is None else _num(r.latency)
    units = ", ".join(r.units) or "-"
    nums = (r.arrivals, r.queue_size, r.memory, r.output)
    return (str(r.time), *(_num(v) for v in nums), latency, units)


def _num(value: Any) -> str:
    return f"{float(value):.5g}"


def _row(cells: tuple[str, ...]) -> str:
    widths = (6, 11, 11, 11, 11, 10)
    head = "".join(c.rjust(w) for c, w in zip(cells, widths, strict=False))
    return f"{head}  {cells[-1]}"
