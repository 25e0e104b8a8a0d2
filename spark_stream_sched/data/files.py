"""Input streams as directories of files, and the reader the standalone CLI uses.

An input stream on disk is a directory of files whose **name order is the stream order**:
``part-00000.parquet``, ``part-00001.parquet``, ... (the same convention as Spark's file
sources). :func:`write_input` splits a table into such files; :func:`read_input` reads a directory
(files sorted by name) or a single file back into one table.

Supported formats: ``parquet``, ``csv`` (with a header line) and ``jsonl`` (one JSON object per
line). Unreadable or malformed files raise :class:`~spark_stream_sched.errors.InputError` whose
message names the file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.runtime.packets import event_times

#: Supported formats and the file name suffixes that belong to each.
FORMATS: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "jsonl": (".jsonl", ".json", ".ndjson"),
}


def write_input(table: pa.Table, directory: str | Path, fmt: str = "parquet",
                n_files: int = 1) -> list[Path]:
    """Write one input stream as ``n_files`` files named in stream order.

    Parameters
    ----------
    table : pyarrow.Table
        The stream's rows, in stream order.
    directory : str or Path
        Created if missing. Existing ``part-*`` files of the same format are left alone, so use
        an empty directory.
    fmt : {'parquet', 'csv', 'jsonl'}
        File format.
    n_files : int
        Number of files (>= 1); rows are split into contiguous, near-equal slices, so reading the
        files in name order gives the rows back in order. Files may be empty when
        ``n_files > table.num_rows``.

    Returns
    -------
    list of Path
        The written files, in stream order (``part-00000.<ext>``, ...).

    Raises
    ------
    ConfigError
        Unknown format or ``n_files < 1``.
    InputError
        The table holds a value the format cannot represent (NaN or infinity in ``jsonl``).
    """
    suffix = _suffix(fmt)
    if n_files < 1:
        raise ConfigError(f"n_files must be >= 1, got {n_files}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, table.num_rows, n_files + 1).astype(np.int64)
    paths = []
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        path = out / f"part-{i:05d}{suffix}"
        _WRITERS[fmt](table.slice(int(lo), int(hi - lo)), path)
        paths.append(path)
    return paths


def write_inputs(tables: Sequence[pa.Table], root: str | Path, fmt: str = "parquet",
                 n_files: int = 1) -> list[Path]:
    """Write N input streams as ``root/input-000``, ``root/input-001``, ...; return the dirs."""
    dirs = [Path(root) / f"input-{i:03d}" for i in range(len(tables))]
    for table, directory in zip(tables, dirs, strict=True):
        write_input(table, directory, fmt, n_files)
    return dirs


def read_input(path: str | Path, fmt: str = "parquet", schema: pa.Schema | None = None,
               ts_column: str | None = None) -> pa.Table:
    """Read one input stream from a directory of files or from a single file.

    Parameters
    ----------
    path : str or Path
        A file, or a directory whose files with a suffix of ``fmt`` are read in name order.
        Names starting with ``.`` or ``_`` (``_SUCCESS``, ``.crc`` files) are ignored.
    fmt : {'parquet', 'csv', 'jsonl'}
        File format.
    schema : pyarrow.Schema, optional
        Expected columns and types. CSV and JSON values are parsed as these types (instead of
        inferring types per file) and Parquet columns are cast to them.
    ts_column : str, optional
        Event-time column to check file by file (present, not null, int64 ms or a timestamp,
        within the supported range years 0001..9999), so that an error names the file and
        the row in it rather than a position in the concatenated stream.

    Returns
    -------
    pyarrow.Table
        All rows, files concatenated in name order, rows in file order.

    Raises
    ------
    InputError
        The path does not exist, the directory has no file of the format, a file is unreadable
        or malformed, or the files' schemas disagree (text formats may widen integer columns
        to floating point across files), or (with ``ts_column``) an event time is missing or
        out of range. The message names the file (and the row).
    ConfigError
        Unknown format.
    """
    _suffix(fmt)
    # Text formats infer types per file (a float column of whole numbers reads as int64), so
    # they may widen int to float across files, like Spark's schema inference; Parquet may not.
    promote = "default" if fmt == "parquet" else "permissive"
    tables: list[pa.Table] = []
    for file in _input_files(Path(path), fmt):
        table = _read_file(file, fmt, schema)
        if table is None:
            continue
        if ts_column is not None:
            event_times(table, ts_column, f"file {file}")
        tables.append(table if not tables else _unify(tables[0], table, file, promote))
    if not tables:
        return (schema or pa.schema([])).empty_table()
    return pa.concat_tables(tables, promote_options=promote)


def _suffix(fmt: str) -> str:
    """Return the canonical file suffix of ``fmt``; ConfigError for an unknown format."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown input format {fmt!r}; use one of {', '.join(FORMATS)}")
    return FORMATS[fmt][0]


def _input_files(path: Path, fmt: str) -> list[Path]:
    """List the files to read for ``path``, in name order."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"input path {path} does not exist")
    names = sorted(p for p in path.iterdir() if p.is_file() and p.name[0] not in "._")
    files = [p for p in names if p.name.endswith(FORMATS[fmt])]
    if not files:
        found = ", ".join(p.name for p in names[:5]) or "nothing"
        raise InputError(f"input directory {path} has no {fmt} files "
                         f"(suffix {'/'.join(FORMATS[fmt])}); found {found}")
    return files


def _read_file(path: Path, fmt: str, schema: pa.Schema | None) -> pa.Table | None:
    """Read one file (None for an empty jsonl file); InputError naming the file on failure."""
    try:
        if fmt == "parquet":
            table = pq.read_table(path)
            return table if schema is None else table.select(schema.names).cast(schema)
        if fmt == "csv":
            convert = pa_csv.ConvertOptions() if schema is None else pa_csv.ConvertOptions(
                column_types=dict(zip(schema.names, schema.types, strict=True)),
                include_columns=schema.names)
            return pa_csv.read_csv(path, convert_options=convert)
        return _read_jsonl(path, schema)
    except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot read {fmt} file {path}: {exc}") from exc


def _read_jsonl(path: Path, schema: pa.Schema | None) -> pa.Table | None:
    """Read newline-delimited JSON; None for an empty file (it has no schema to offer)."""
    if path.stat().st_size == 0:
        return None
    parse = pa_json.ParseOptions(explicit_schema=schema,
                                 unexpected_field_behavior="ignore" if schema else "infer")
    return pa_json.read_json(path, parse_options=parse)


def _unify(first: pa.Table, table: pa.Table, file: Path, promote: str) -> pa.Table:
    """Reorder ``table``'s columns like ``first``'s; InputError if the schemas cannot unify."""
    if table.schema == first.schema:
        return table
    if sorted(table.schema.names) != sorted(first.schema.names):
        raise InputError(f"file {file} has columns {table.schema.names}, expected "
                         f"{first.schema.names} as in the first file")
    try:
        pa.unify_schemas([first.schema, table.schema], promote_options=promote)
    except pa.ArrowException as exc:
        raise InputError(f"file {file} has schema {table.schema} which does not match the first "
                         f"file's {first.schema}: {exc}") from exc
    return table.select(first.schema.names)


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path)


def _write_csv(table: pa.Table, path: Path) -> None:
    pa_csv.write_csv(table, path)


def _write_jsonl(table: pa.Table, path: Path) -> None:
    """Write one JSON object per line; numbers keep their exact (shortest round-trip) text."""
    if table.num_rows == 0:
        path.write_text("")
        return
    fields = [_json_field(name, table.column(name)) for name in table.column_names]
    pieces: list[pa.Array | str] = []
    for i, field in enumerate(fields):
        pieces += [", " if i else "{", field]
    lines = pc.binary_join_element_wise(*pieces, "}", "")
    path.write_text("\n".join(lines.to_pylist()) + "\n", encoding="utf-8")


def _json_field(name: str, chunked: pa.ChunkedArray) -> pa.Array:
    """Build ``"name": value`` text for every row of a column, with Arrow kernels."""
    column = chunked.combine_chunks()
    kind = column.type
    if pa.types.is_floating(kind) and pc.all(pc.is_finite(column)).as_py() is False:
        raise InputError(f"column {name!r} holds NaN or infinity, which JSON cannot "
                         f"represent; write it as parquet instead")
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _json_strings(column)
    else:
        raise ConfigError(f"the jsonl writer supports integer, floating, boolean and string "
                          f"columns; column {name!r} is {kind}")
    text = pc.fill_null(text, "null")
    return pc.binary_join_element_wise(json.dumps(name) + ": ", text, "")


def _json_strings(column: pa.Array) -> pa.Array:
    """Quote and escape strings as JSON (per value only when one holds a control character)."""
    if pc.any(pc.match_substring_regex(column, "[\\x00-\\x1f]")).as_py():
        return pa.array([None if v is None else json.dumps(v, ensure_ascii=False)
                         for v in column.to_pylist()], pa.string())
    escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")


_WRITERS = {"parquet": _write_parquet, "csv": _write_csv, "jsonl": _write_jsonl}
