"""``spark-stream-sched nexmark generate``: deterministic Nexmark events as Parquet files.

Writes ``--events`` events of the Nexmark model (:mod:`spark_stream_sched.data.nexmark`) under
``--out`` as three inputs, ``person/``, ``auction/`` and ``bid/``, each a run of Parquet files
sorted by event time. The same ``--events`` and ``--seed`` give the same files on every run and
machine, and a longer run begins with the events of a shorter one.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from spark_stream_sched.data.nexmark import NexmarkConfig, write_nexmark


def register(subparsers: Any) -> None:
    """Add the ``nexmark`` sub-command and its ``generate`` action."""
    parser = subparsers.add_parser(
        "nexmark", help="generate deterministic Nexmark events (persons, auctions, bids)",
        description="The Nexmark benchmark's online-auction events, every field a function of "
                    "the seed and the event number.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    generate = actions.add_parser(
        "generate", help="write events as sorted Parquet files",
        description="Write --events events under --out as person/, auction/ and bid/ "
                    "(Parquet, sorted by event time; 1 : 3 : 46 persons : auctions : bids).")
    generate.add_argument("--events", type=int, required=True, help="how many events")
    generate.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    generate.add_argument("--out", required=True,
                          help="a new or empty directory (nothing is overwritten)")
    generate.add_argument("--rows-per-file", type=int, default=1_000_000,
                          help="rows per Parquet file of each input (default 1,000,000)")
    generate.set_defaults(func=run)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def run(args: argparse.Namespace) -> int:
    """Write the events; print what was written and how long it took."""
    config = NexmarkConfig(seed=args.seed)
    bar = _bar(args.events)
    started = time.perf_counter()
    try:
        rows = write_nexmark(args.out, args.events, config, rows_per_file=args.rows_per_file,
                             progress=None if bar is None else (
                                 lambda done: bar.update(done - bar.n)))
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - started
    print(f"{args.events:,} events in {seconds:.1f} s to {args.out}: "
          + ", ".join(f"{n:,} {kind}" for kind, n in rows.items()))
    return 0


def _bar(total: int) -> Any:
    """A tqdm bar on stderr when tqdm is installed and stderr is a terminal, else None."""
    try:
        from tqdm import tqdm
    except ModuleNotFoundError:
        return None
    return tqdm(total=total, desc="nexmark events", unit="ev", unit_scale=True,
                file=sys.stderr, disable=None, leave=False)
