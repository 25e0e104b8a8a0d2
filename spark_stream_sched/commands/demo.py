"""``spark-stream-sched demo``: smart-grid sample data through ordered-agg on local Spark.

Generates seeded readings of 1000 meters forwarded by 8 data concentrators (8 input streams),
runs the deterministic merge + 30 s / 3 s window aggregation on ``local[*]`` with
``Trigger.AvailableNow``, and prints a few result windows and a summary. ``--engine runtime``
runs the same query on the pure runtime without starting Spark.

The directory the demo writes (``--output``) carries its marker, ``_demo.json``: the demo
starts only in a new or empty directory or in one that holds the marker, and removes only its
own ``output`` and ``checkpoint`` there (:func:`prepare_root`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.jobs.config import DataConfig, JobConfig

#: ``--engine spark`` means the ``ordered-agg`` source.
DEMO_ENGINES = {"spark": "source", "sink": "sink", "runtime": "runtime"}
#: The file that marks a directory as the demo's own (written before anything else in it).
MARKER = "_demo.json"
_MARK = {"written_by": "spark-stream-sched demo", "holds": ["input", "output", "checkpoint"]}


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command."""
    parser = subparsers.add_parser(
        "demo", help="run the smart-grid demo on an embedded local Spark",
        description="Generate seeded smart-meter readings from 8 data concentrators, merge and "
                    "aggregate them deterministically with ordered-agg on local[*] Spark, and "
                    "print one result window and a summary.")
    parser.add_argument("--engine", choices=sorted(DEMO_ENGINES), default="spark",
                        help="spark: readStream.format('ordered-agg') (default); sink: file "
                             "streams into writeStream.format('ordered-agg'); runtime: no Spark")
    parser.add_argument("--output", default="demo-output",
                        help="directory for inputs, checkpoint and results (default: "
                             "./demo-output; a new or empty directory, or one an earlier demo "
                             "wrote: its results and checkpoint are replaced)")
    parser.add_argument("--tmp", action="store_true",
                        help="use a temporary directory, removed afterwards")
    parser.add_argument("--rows", type=int, default=100_000, help="rows to generate")
    parser.add_argument("--show", type=int, default=12, help="result rows to print")
    parser.add_argument("--quiet", action="store_true", help="no line per micro-batch")
    parser.set_defaults(func=run)


def demo_config(root: Path, engine: str, rows: int, show: int) -> JobConfig:
    """Build the demo job: 8 concentrators, 1000 meters, 30 s / 3 s windows under ``root``."""
    data = DataConfig(generate=True, dir=str(root / "input"), inputs=8, meters=1000, rows=rows,
                      files_per_input=4, seed=42)
    return dataclasses.replace(
        JobConfig(name="demo", engine=DEMO_ENGINES[engine], output=str(root / "output"),
                  checkpoint=str(root / "checkpoint"), master="local[*]", show=show,
                  max_records_per_trigger=max(10_000, rows // 2), max_files_per_trigger=2),
        data=data)


def prepare_root(root: Path) -> None:
    """Make ``root`` the demo's directory for a fresh run; remove only what a demo wrote there.

    A missing or empty directory gets the marker :data:`MARKER`; in a marked one the earlier
    run's ``output`` and ``checkpoint`` are removed (its inputs are reused when identical).

    Raises
    ------
    ConfigError
        ``root`` is not a directory, or holds files without the demo's marker.
    """
    if root.exists() and not root.is_dir():
        raise ConfigError(f"demo --output {root}: not a directory; give a new directory (or "
                          f"one an earlier demo wrote)")
    marker = root / MARKER
    if root.is_dir() and any(root.iterdir()) and not marker.is_file():
        raise ConfigError(f"demo --output {root}: the directory is not empty and was not "
                          f"written by the demo (no {MARKER}), so nothing in it is replaced; "
                          f"give a new or empty directory, or remove this one yourself")
    root.mkdir(parents=True, exist_ok=True)
    if not marker.is_file():
        marker.write_text(json.dumps(_MARK) + "\n")
    for sub in ("output", "checkpoint"):  # a fresh run; inputs are reused when identical
        shutil.rmtree(root / sub, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    """Generate, run and print; return the exit code."""
    from spark_stream_sched.jobs.results import print_report
    from spark_stream_sched.jobs.runner import run_job

    root = Path(tempfile.mkdtemp(prefix="sss-demo-")) if args.tmp else Path(args.output)
    try:
        prepare_root(root)
        cfg = demo_config(root, args.engine, args.rows, args.show)
        print(f"demo: {cfg.data.rows:,} smart-meter readings from {cfg.data.inputs} data "
              f"concentrators, {cfg.query.window}/{cfg.query.slide} windows per meter, "
              f"engine {args.engine}")
        result = run_job(cfg, master=cfg.master, progress=not args.quiet)
        print_report(result, args.show)
    finally:
        if args.tmp:
            shutil.rmtree(root, ignore_errors=True)
    return 0
