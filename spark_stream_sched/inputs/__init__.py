"""The input layer: the only place input files are listed, read, counted and written.

Used by the standalone CLI, the jobs, the sample-data generators, the benchmarks and the Spark
source. Pure Python + PyArrow (no pyspark).

=====================  ======================================================================
module                 concept
=====================  ======================================================================
``formats``            the one table of formats: ``parquet``, ``csv`` (header row), ``jsonl``
                       (one object a line; alias ``json``) — each format's read and write
``listing``            the one listing rule: directory → visible files in name order; glob →
                       matches in path order; a file → itself
``files``              one file's row count, row ranges and own schema (an empty file: 0 rows)
``schema``             schema resolution: declared, else the first file that holds a row
``snapshot``           whole inputs: write a table as files; read a static snapshot (CLI, jobs)
``cursors``            streaming reads: :class:`Cursor`, admission, rows between two cursors
``naming``             errors that name the input (id and path), the file and the row
``sniff``              a file's real format from its first bytes ("not CSV, looks like
                       Parquet")
``manifest``           durable per-input file manifests; late-sorting files fail (or are
                       skipped with ``lateFiles=skip``), never ignored in silence
=====================  ======================================================================
"""

from __future__ import annotations

from spark_stream_sched.inputs.cursors import (
    advance,
    available_rows,
    peek_event_times,
    read_between,
    time_aligned_shares,
    warn_ignored_files,
)
from spark_stream_sched.inputs.files import count_rows, infer_schema, read_file_rows
from spark_stream_sched.inputs.formats import (
    FORMAT_NAMES,
    FORMATS,
    FileFormat,
    canonical_format,
    get_format,
)
from spark_stream_sched.inputs.listing import list_files, list_finished_files
from spark_stream_sched.inputs.manifest import FileManifest, manifest_path, read_manifest
from spark_stream_sched.inputs.naming import about_input, locate
from spark_stream_sched.inputs.schema import resolve_schema
from spark_stream_sched.inputs.snapshot import read_input, read_inputs, write_input, write_inputs
from spark_stream_sched.inputs.streams import Cursor, InputStream

__all__ = [
    "FORMATS", "FORMAT_NAMES", "Cursor", "FileFormat", "FileManifest", "InputStream",
    "about_input", "advance", "available_rows", "canonical_format", "count_rows", "get_format",
    "infer_schema", "list_files", "list_finished_files", "locate", "manifest_path",
    "peek_event_times", "read_between", "read_file_rows", "read_input", "read_inputs",
    "read_manifest", "resolve_schema", "time_aligned_shares", "warn_ignored_files",
    "write_input", "write_inputs",
]
