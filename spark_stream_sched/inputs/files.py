"""Rows of one input file: counts, row ranges, the file's own schema (every format, one place).

Counts and whole-file reads of text formats are cached by ``(path, size, mtime_ns)``, so the
driver's planning (counts, peeks) and the reads of one micro-batch parse a file once. A file of
zero bytes holds zero rows in every format (``inputs/formats.py``).

Pure Python + PyArrow (no pyspark).
"""

from __future__ import annotations

import functools
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq

from spark_stream_sched.errors import FormatMismatchError, InputError, one_line, schema_line
from spark_stream_sched.inputs.formats import canonical_format, get_format
from spark_stream_sched.inputs.listing import file_identity
from spark_stream_sched.inputs.sniff import format_mismatch

_EMPTY = pa.schema([])


@functools.lru_cache(maxsize=4)
def _read_whole(identity: tuple[str, int, int], fmt: str, schema: Any) -> Any:
    path, size, _ = identity
    if size == 0:
        return (schema if schema is not None else _EMPTY).empty_table()
    mismatch = format_mismatch(path, fmt)  # CSV would read a Parquet file as garbage text
    if mismatch is not None:
        raise mismatch
    try:
        return get_format(fmt).read(path, schema)
    except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
        raise_unreadable(fmt, path, exc, _untyped_hint(schema))


def unreadable(fmt: str, path: str, exc: BaseException, hint: str = "") -> InputError:
    """The error for an input file that cannot be read: names the file and what to do.

    A file of another format gets :class:`FormatMismatchError`; otherwise the reader's message
    is kept, with bytes that are not printable text escaped (a parser quotes what it read).
    """
    mismatch = format_mismatch(path, fmt)
    if mismatch is not None:
        return mismatch
    return InputError(f"cannot read {fmt} file {path!r}: {printable(str(exc))}{hint}; fix or "
                      f"replace the file (a file must be complete when it appears in an input: "
                      f"write it elsewhere and rename it into place), or move it out of the "
                      f"input")


def raise_unreadable(fmt: str, path: str, exc: BaseException, hint: str = "") -> NoReturn:
    """Raise :func:`unreadable`'s error, chained to ``exc`` unless it is a format mismatch.

    A reader's error about a file of another format quotes the bytes it choked on; the
    mismatch says all there is to say, so that chain is dropped.
    """
    error = unreadable(fmt, path, exc, hint)
    if isinstance(error, FormatMismatchError):
        raise error from None
    raise error from exc


def printable(text: str, limit: int = 300) -> str:
    """``text`` with unprintable characters escaped as in ``repr``, cut to ``limit`` characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return shown + ("..." if len(text) > limit else "")


def _untyped_hint(schema: Any) -> str:
    untyped = [f.name for f in schema or () if pa.types.is_null(f.type)]
    if not untyped:
        return ""
    return (f"; column(s) {untyped} have no type, being null in every row of the file the "
            f"schema was inferred from — declare the schema (option schema)")


@functools.lru_cache(maxsize=4096)
def _count_rows(identity: tuple[str, int, int], fmt: str) -> int:
    path, size, _ = identity
    if size == 0:
        return 0
    if fmt == "parquet":
        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (pa.ArrowException, OSError) as exc:
            raise_unreadable(fmt, path, exc)
    return int(_read_whole(identity, fmt, None).num_rows)


def count_rows(path: str, fmt: str) -> int:
    """Rows in one file: Parquet footer metadata; CSV/JSON-lines are parsed once and cached."""
    return _count_rows(file_identity(path), canonical_format(fmt))


def infer_schema(path: str, fmt: str) -> Any:
    """The schema one file offers by itself: Parquet's own; inferred types for CSV/JSON-lines.

    An empty file offers no columns.
    """
    identity, fmt = file_identity(path), canonical_format(fmt)
    if fmt == "parquet" and identity[1] > 0:
        try:
            return pq.ParquetFile(path).schema_arrow
        except (pa.ArrowException, OSError) as exc:
            raise_unreadable(fmt, path, exc)
    return _read_whole(identity, fmt, None).schema


def _widens(source: Any, target: Any) -> bool:
    """Whether values of type ``source`` convert to ``target`` without changing their kind."""
    kinds = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp,
             pa.types.is_string, pa.types.is_large_string)
    if source == target or pa.types.is_null(source):
        return True
    if pa.types.is_integer(source) and pa.types.is_floating(target):
        return True
    return any(kind(source) and kind(target) for kind in kinds)


def conform(table: Any, schema: Any, path: str) -> Any:
    """``table`` with ``schema``'s column order and types (InputError naming the file).

    Types may widen (int32 to int64, integer to floating point, timestamp units); a column of
    another kind (integers where the schema has strings) is refused, not converted.
    """
    own = table.schema
    try:
        table = table.select(schema.names)
        for field in schema:
            if not _widens(table.schema.field(field.name).type, field.type):
                raise pa.ArrowInvalid(f"column {field.name!r} is "
                                      f"{table.schema.field(field.name).type}, not {field.type}")
        return table.cast(schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"file {path!r} does not match the input's schema: {one_line(exc)}; "
                         f"fix the file, or declare the schema (option schema); the file has "
                         f"{schema_line(own)}, the input {schema_line(schema)}") from exc


def read_file_rows(path: str, fmt: str, schema: Any, start: int = 0,
                   stop: int | None = None) -> Any:
    """Rows ``[start, stop)`` of one file (all rows by default), conformed to ``schema``.

    Parquet reads only the row groups that overlap the range. With ``schema`` None the file's
    own columns and types are returned.
    """
    fmt = canonical_format(fmt)
    identity = file_identity(path)
    stop = _count_rows(identity, fmt) if stop is None else stop
    if fmt == "parquet" and identity[1] > 0:
        table = _read_parquet_range(path, start, stop, schema)
    else:
        table = _read_whole(identity, fmt, schema).slice(start, stop - start)
    return table if schema is None else conform(table, schema, path)


def _read_parquet_range(path: str, start: int, stop: int, schema: Any) -> Any:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise_unreadable("parquet", path, exc)
    groups: list[int] = []
    first_row: int | None = None
    offset = 0
    for i in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(i).num_rows
        if offset < stop and offset + n > start:
            groups.append(i)
            first_row = offset if first_row is None else first_row
        offset += n
    columns = schema.names if schema is not None else None
    if not groups:
        empty = pf.schema_arrow.empty_table()
        return empty if columns is None else conform(empty, schema, path)
    try:
        table = pf.read_row_groups(groups, columns=columns, use_threads=False)
    except KeyError as exc:
        raise InputError(f"cannot read {path!r} with columns {columns}: {exc}; the file lacks "
                         f"a column of the input schema: fix the file or the schema (option "
                         f"schema)") from exc
    except (pa.ArrowException, OSError) as exc:
        raise_unreadable("parquet", path, exc)
    return table.slice(start - (first_row or 0), stop - start)
