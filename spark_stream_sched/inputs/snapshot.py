"""Whole inputs at once: write a table as an input's files, read a static snapshot back.

The standalone CLI (``spark-stream-sched aggregate``), the jobs and the benchmarks read an input
as a **static snapshot**: the files the one listing rule lists when the read starts
(:func:`~spark_stream_sched.inputs.listing.list_finished_files`: a glob matching no file is an
error), all of them, in stream order. A file added later is not part of that run
(there is no "later" to skip it in: the next run reads it). The Spark source instead follows
its inputs as streams through durable manifests (``inputs/manifest.py``), which refuse a file
that sorts before one already read.

Both read every file with the same schema (``inputs/schema.py``) through the same per-format
reader (``inputs/formats.py``), so they return identical rows for identical files.

Pure Python + PyArrow (no pyspark).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.files import read_file_rows
from spark_stream_sched.inputs.formats import get_format
from spark_stream_sched.inputs.listing import list_finished_files
from spark_stream_sched.inputs.naming import about_input
from spark_stream_sched.inputs.schema import resolve_schema
from spark_stream_sched.runtime.packets import event_times

#: What to do when no file holds a row, as the snapshot readers say it.
SNAPSHOT_HINT = "write at least one row, or pass the schema"


def read_input(path: str | Path, fmt: str = "parquet", schema: Any = None,
               ts_column: str | None = None) -> Any:
    """Read one input (a directory, a glob or a single file) as a static snapshot.

    Parameters
    ----------
    path : str or Path
        The input, listed by the one listing rule (``inputs/listing.py``).
    fmt : {'parquet', 'csv', 'jsonl', 'json'}
        File format (``json`` is an alias of ``jsonl``).
    schema : pyarrow.Schema, optional
        Columns and types; CSV and JSON values are parsed as these types. Default: inferred
        from the first file that holds a row (``inputs/schema.py``).
    ts_column : str, optional
        Event-time column to check file by file (present, not null, int64 ms or a timestamp,
        within years 0001..9999), so that an error names the file and the row in it.

    Returns
    -------
    pyarrow.Table
        All rows, files concatenated in stream order, rows in file order.

    Raises
    ------
    InputError
        The path does not exist, a file is unreadable, malformed or does not match the schema,
        or (with ``ts_column``) an event time is missing or out of range; naming the file.
    ConfigError
        Unknown format, or no schema given and no file holds a row.
    """
    schema = resolve_schema([str(path)], fmt, schema, SNAPSHOT_HINT)
    return read_files(list_finished_files(str(path)), fmt, schema, ts_column)


def read_inputs(paths: Sequence[str | Path], fmt: str = "parquet", schema: Any = None,
                ts_column: str | None = None) -> list[Any]:
    """Read several inputs as static snapshots with one schema (as the Spark source does)."""
    schema = resolve_schema([str(p) for p in paths], fmt, schema, SNAPSHOT_HINT)
    tables = []
    for i, path in enumerate(paths):
        with about_input(i, str(path)):
            tables.append(read_files(list_finished_files(str(path)), fmt, schema, ts_column))
    return tables


def read_files(files: Sequence[str], fmt: str, schema: Any,
               ts_column: str | None = None) -> Any:
    """Every row of ``files`` in order, conformed to ``schema``."""
    parts = [read_file_rows(f, fmt, schema) for f in files]
    if ts_column is not None:
        for file, part in zip(files, parts, strict=True):
            event_times(part, ts_column, f"file {file}")
    return pa.concat_tables([schema.empty_table(), *parts])


def write_input(table: Any, directory: str | Path, fmt: str = "parquet",
                n_files: int = 1, row_group_size: int | None = None) -> list[Path]:
    """Write one input as ``n_files`` files whose name order is the stream order.

    Parameters
    ----------
    table : pyarrow.Table
        The stream's rows, in stream order.
    directory : str or Path
        Created if missing. Existing ``part-*`` files are overwritten, so use an empty
        directory.
    fmt : {'parquet', 'csv', 'jsonl', 'json'}
        File format.
    n_files : int
        Number of files (>= 1); rows are split into contiguous, near-equal slices
        (``part-00000.<suffix>``, ...). Files hold no rows when ``n_files > table.num_rows``;
        every reader reads such a file as zero rows.
    row_group_size : int, optional
        Rows per Parquet row group (other formats have none).

    Returns
    -------
    list of Path
        The written files, in stream order.

    Raises
    ------
    ConfigError
        Unknown format or ``n_files < 1``.
    InputError
        The table holds a value the format cannot represent (NaN or infinity in ``jsonl``).
    """
    file_format = get_format(fmt)
    if n_files < 1:
        raise ConfigError(f"n_files must be >= 1, got {n_files}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, table.num_rows, n_files + 1).astype(np.int64)
    paths = []
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        path = out / f"part-{i:05d}{file_format.suffix}"
        file_format.write(table.slice(int(lo), int(hi - lo)), path, row_group_size)
        paths.append(path)
    return paths


def write_inputs(tables: Sequence[Any], root: str | Path, fmt: str = "parquet",
                 n_files: int = 1) -> list[Path]:
    """Write N inputs as ``root/input-000``, ``root/input-001``, ...; return the directories."""
    dirs = [Path(root) / f"input-{i:03d}" for i in range(len(tables))]
    for table, directory in zip(tables, dirs, strict=True):
        write_input(table, directory, fmt, n_files)
    return dirs
