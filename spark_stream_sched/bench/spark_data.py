"""``bench spark``'s workload: the input files, the truth, and each engine's output against it.

The workload is the smart-grid data set (:mod:`spark_stream_sched.data.smart_grid`): N inputs
sorted by ``ts``, each written as :data:`FILES_PER_INPUT` Parquet files with increasing
modification times (Spark's file source admits files in that order). Every engine reads these
files. The transformation reads them through hard links in directories of its own, which add
one last file per input holding an end-of-input row (docs/transform.md, "End of input"): that
row is how a bounded input tells ``ordered(...)`` it is finished, where the sink has
``finish_sink`` and the source its end of files. No other engine sees those files.

The truth is each (window, key)'s count and first value in the total order ``(ts, input, seq)``:
from the reference oracle (:mod:`spark_stream_sched.testing.reference`) up to
:data:`ORACLE_MAX_ROWS` rows, from the vectorised :func:`true_windows` (checked against the
oracle in ``tests/spark/test_job.py``) above that.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError

logger = logging.getLogger(__name__)

#: Above this many rows the truth comes from :func:`true_windows` instead of the pure-Python
#: reference oracle (which needs minutes and gigabytes for millions of rows).
ORACLE_MAX_ROWS = 300_000
FILES_PER_INPUT = 16
AGGREGATES = ("count(*) as n", "avg(value) as mean", "first(value) as first_v")
#: transform-keyed's operators before the windows: a keyed row operator that keeps every row
#: (so the windows, and the truth, are those without it).
KEYED_STAGES = ("delta(value) as change",)
#: Boolean column of the transformation's inputs; true on the end-of-input row only.
END_COLUMN = "end_of_input"
#: The file holding that row; it sorts, and is admitted, after every data file.
END_FILE = "zz-end-of-input.parquet"
#: Pseudo key under which :func:`result_rows` records duplicate result rows.
DUPLICATES = (-1, -1)
Truth = dict[tuple[int, int], tuple[int, float]]
Output = dict[tuple[int, int], tuple[int, float, float]]


@dataclass(frozen=True)
class Workload:
    """Where one case's inputs are and what the query computes (JSON-able, for child runs)."""

    dirs: tuple[str, ...]
    end_dirs: tuple[str, ...]
    rows: int
    keys: int
    size: str
    slide: str
    watermark: str
    #: the source's ``numPartitions`` (Spark tasks per micro-batch); None: the source's default
    partitions: int | None = None

    @property
    def n_inputs(self) -> int:
        """Number of inputs."""
        return len(self.dirs)

    @functools.cached_property
    def schema(self) -> pa.Schema:
        """The inputs' Arrow schema (of the first data file); ConfigError if there is none."""
        files = sorted(Path(self.dirs[0]).glob("part-*.parquet"))
        if not files:
            raise ConfigError(f"bench spark: no input file part-*.parquet in {self.dirs[0]}")
        return pq.read_schema(files[0])

    def max_records(self, files: int) -> int:
        """Rows in ``files`` files of every input: the source's limit for that batching."""
        return max(1, int(files * self.rows / FILES_PER_INPUT))

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values (inverse: :meth:`from_json`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workload:
        """Inverse of :meth:`to_json`."""
        return cls(**{**data, "dirs": tuple(data["dirs"]), "end_dirs": tuple(data["end_dirs"])})


def prepare_data(root: Path, rows: int, n_inputs: int, keys: int,
                 seed: int) -> tuple[list[Path], list[pa.Table]]:
    """Generate the smart-grid streams and write them as ordered Parquet file directories."""
    from spark_stream_sched.data.smart_grid import smart_grid_streams
    from spark_stream_sched.inputs import write_inputs
    from spark_stream_sched.jobs.runner import order_modification_times

    tables = smart_grid_streams(n_inputs, keys, rows=rows, seed=seed)
    dirs = write_inputs(tables, root / "input", "parquet", FILES_PER_INPUT)
    order_modification_times(dirs)
    return dirs, tables


def with_end_rows(dirs: Sequence[Path], root: Path) -> list[Path]:
    """Directories ``root/<input>`` holding the inputs' files (hard links) and an end row.

    The end row repeats the input's last row with :data:`END_COLUMN` true, in
    :data:`END_FILE`, modified after every data file; data files lack the column, which Spark
    reads as null (not the end).
    """
    out = []
    for directory in dirs:
        target = root / directory.name
        target.mkdir(parents=True)
        files = sorted(directory.glob("part-*.parquet"))
        for path in files:
            os.link(path, target / path.name)
        last = pq.read_table(files[-1])
        last = last.slice(last.num_rows - 1).append_column(END_COLUMN, pa.array([True]))
        pq.write_table(last, target / END_FILE)
        stamp = max(p.stat().st_mtime for p in files) + 1
        os.utime(target / END_FILE, (stamp, stamp))
        out.append(target)
    return out


# -- the truth ---------------------------------------------------------------------------------


def true_windows(tables: Sequence[pa.Table], size_ms: int, slide_ms: int) -> Truth:
    """Map ``(window_start, key)`` to ``(count, first value)`` in the total order.

    Every row is expanded to each window covering it; rows are ordered by
    ``(window, key, ts, input, seq)`` and the first of each (window, key) group is kept.
    """
    ts = np.concatenate([t.column("ts").to_numpy() for t in tables]).astype(np.int64)
    key = np.concatenate([t.column("meter").to_numpy() for t in tables]).astype(np.int64)
    value = np.concatenate([t.column("value").to_numpy(zero_copy_only=False) for t in tables])
    source = np.concatenate([np.full(t.num_rows, i) for i, t in enumerate(tables)])
    seq = np.concatenate([np.arange(t.num_rows) for t in tables])
    order = np.lexsort((seq, source, ts))
    ts, key, value = ts[order], key[order], value[order]
    per_row = size_ms // slide_ms + (1 if size_ms % slide_ms else 0)
    last_k = np.floor_divide(ts, slide_ms)
    starts, keys, rank = [], [], []
    position = np.arange(len(ts))
    for j in range(per_row):
        k = last_k - j
        inside = k * slide_ms + size_ms > ts
        starts.append(k[inside] * slide_ms)
        keys.append(key[inside])
        rank.append(position[inside])
    start, group_key, pos = np.concatenate(starts), np.concatenate(keys), np.concatenate(rank)
    grouped = np.lexsort((pos, group_key, start))
    start, group_key, pos = start[grouped], group_key[grouped], pos[grouped]
    head = np.ones(len(start), dtype=bool)
    head[1:] = (start[1:] != start[:-1]) | (group_key[1:] != group_key[:-1])
    bounds = np.append(np.flatnonzero(head), len(start))
    counts = np.diff(bounds)
    firsts = value[pos[head]]
    return {(int(s), int(k)): (int(c), float(f)) for s, k, c, f in
            zip(start[head], group_key[head], counts, firsts, strict=True)}


def reference_windows(tables: Sequence[pa.Table], size_ms: int, slide_ms: int) -> Truth:
    """The same map from the reference oracle (slow; small inputs only)."""
    from spark_stream_sched.runtime.window.spec import WindowSpec
    from spark_stream_sched.testing.reference import reference_aggregate

    rows = reference_aggregate(list(tables), WindowSpec(size_ms, slide_ms), ["meter"],
                               "count(*) as n, first(value) as first_v")
    return {(r["window_start"], r["meter"]): (r["n"], r["first_v"]) for r in rows}


def truth_of(tables: Sequence[pa.Table], size_ms: int, slide_ms: int) -> tuple[Truth, str]:
    """The truth and the name of what computed it (module doc)."""
    if sum(t.num_rows for t in tables) <= ORACLE_MAX_ROWS:
        return reference_windows(tables, size_ms, slide_ms), "reference"
    return true_windows(tables, size_ms, slide_ms), "true_windows"


# -- comparing outputs -------------------------------------------------------------------------


def result_rows(out: Path) -> Output:
    """``(window_start, key) -> (count, avg, first)`` from a run's committed Parquet output."""
    from spark_stream_sched.jobs.results import read_output

    table = read_output(out / "output", ["meter"])
    if table.num_rows == 0:
        return {}
    cols = [table.column(c).to_pylist() for c in ("window_start", "meter", "n", "mean",
                                                    "first_v")]
    rows: Output = {}
    duplicates = 0
    for start, key, n, mean, first in zip(*cols, strict=True):
        duplicates += (start, key) in rows
        rows[(start, key)] = (n, mean, first)
    if duplicates:
        logger.warning("%s: %d duplicate (window, key) result rows", out, duplicates)
        rows[DUPLICATES] = (duplicates, 0.0, 0.0)  # makes the run differ from a clean one
    return rows


def differing(a: dict[Any, Any], b: dict[Any, Any]) -> int:
    """Number of (window, key) rows present in only one run or with different values."""
    return sum(1 for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def first_differs(a: Output, b: Output) -> float | None:
    """Share (%) of the windows emitted by both runs whose ``first`` differs."""
    common = [k for k in a.keys() & b.keys() if k != DUPLICATES]
    if not common:
        return None
    return round(100.0 * sum(1 for k in common if a[k][2] != b[k][2]) / len(common), 2)


def truth_scores(rows: Output, truth: Truth) -> dict[str, Any]:
    """Windows emitted and left open, duplicates, and how many emitted ones are right.

    ``windows_open``: true windows not emitted; ``first_matches_pct`` / ``count_matches_pct``:
    shares of the emitted true windows whose ``first`` / ``count`` equal the truth.
    """
    rows_dup = rows.get(DUPLICATES, (0,))[0]
    rows = {k: v for k, v in rows.items() if k != DUPLICATES}
    emitted = [k for k in rows if k in truth]
    first_ok = sum(1 for k in emitted if rows[k][2] == truth[k][1])
    count_ok = sum(1 for k in emitted if rows[k][0] == truth[k][0])

    def share(n: int) -> float | None:
        return round(100.0 * n / len(emitted), 2) if emitted else None

    return {"windows_emitted": len(rows), "windows_true": len(truth),
            "windows_open": len(truth.keys() - rows.keys()), "duplicate_rows": rows_dup,
            "first_matches_pct": share(first_ok), "count_matches_pct": share(count_ok)}


def matches(rows: Output, truth: Truth) -> bool:
    """Every true (window, key) emitted once with the true count and first value, no other."""
    return rows.keys() == truth.keys() and emitted_match(rows, truth)


def emitted_match(rows: Output, truth: Truth) -> bool:
    """Every emitted (window, key) is a true one, emitted once, with its true count and first.

    True windows that were not emitted (left open) do not count against it.
    """
    if DUPLICATES in rows:
        return False
    return all(k in truth and n == truth[k][0] and first == truth[k][1]
               for k, (n, _, first) in rows.items())


# -- the options of our engines ------------------------------------------------------------------


#: The source's engines and their option ``splitRows`` (where a batch's rows are read; ``auto``,
#: the default, is ``tasks`` for the benchmark's Parquet inputs).
SOURCE_SPLIT_ROWS = {"ordered-agg": "auto", "ordered-agg-driver": "driver"}


def source_options(work: Workload, max_records: int | None) -> dict[str, str]:
    """Options of the ``ordered-agg`` source (no ``stateLocation``; None: default sizing)."""
    options = {"inputs": ",".join(work.dirs), "keyColumns": "meter", "window": work.size,
               "slide": work.slide, "aggregates": ", ".join(AGGREGATES),
               "endOfInput": "availableNow"}
    if max_records is not None:
        options["maxRecordsPerTrigger"] = str(max_records)
    if work.partitions is not None:
        options["numPartitions"] = str(work.partitions)
    return options


def sink_options(work: Workload, out: Path) -> dict[str, str]:
    """Options of the ``ordered-agg`` sink writing under ``out``, fed by ``file_streams``."""
    from spark_stream_sched.jobs.runner import INPUT_ID_COLUMN, SEQUENCE_COLUMN

    return {"path": str(out / "output"), "checkpointLocation": str(out / "ck"),
            "inputs": str(work.n_inputs), "inputColumn": INPUT_ID_COLUMN, "keyColumns": "meter",
            "sequenceColumn": SEQUENCE_COLUMN, "window": work.size, "slide": work.slide,
            "aggregates": ", ".join(AGGREGATES)}
