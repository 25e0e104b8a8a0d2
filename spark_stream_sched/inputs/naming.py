"""Errors that say where: the input (id and path), and for an out-of-order row its file and row.

The runtime knows an input by its id and a row by its position in the input; the user knows a
directory, its files and rows within a file. :func:`about_input` prefixes an input error with
the input's id and path; :func:`locate` turns an
:class:`~spark_stream_sched.errors.OutOfOrderError`'s position into the file and the row's
0-based index in it, from the files' row counts. Used by the cursors (the Spark source), the
command line and the jobs. Pure Python + PyArrow (no pyspark).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from spark_stream_sched.errors import FormatMismatchError, InputError, OutOfOrderError
from spark_stream_sched.inputs.files import count_rows
from spark_stream_sched.inputs.listing import list_files

if TYPE_CHECKING:
    from spark_stream_sched.inputs.streams import Cursor, InputStream


@contextmanager
def about_input(input_id: int, path: str) -> Iterator[None]:
    """Prefix an :class:`InputError` raised inside with the input it concerns (id and path).

    Errors that name their input themselves (they start with ``input``) or their file
    (:class:`FormatMismatchError`) pass unchanged.
    """
    try:
        yield
    except InputError as exc:
        if str(exc).startswith("input ") or isinstance(exc, FormatMismatchError):
            raise
        raise InputError(f"input {input_id} ({path}): {exc}") from exc


@contextmanager
def naming_input(stream: InputStream | None) -> Iterator[None]:
    """:func:`about_input` for ``stream`` (nothing is added when it is None)."""
    if stream is None:
        yield
        return
    with about_input(stream.input_id, stream.path):
        yield


def locate(exc: OutOfOrderError, stream: InputStream, files: list[str] | None = None,
           start: Cursor | None = None) -> OutOfOrderError:
    """``exc`` naming the input's path, the file and the row in it.

    ``files`` are the input's files (default: listed now); ``start`` is a cursor at or before
    the row (default: the input's beginning). ``exc`` comes back unchanged when the files hold
    fewer rows than its position (they changed).
    """
    files = files if files is not None else list_files(stream.path)
    if start is not None and start.file is not None and start.file not in files:
        return exc
    left = exc.position - (start.seq if start is not None else 0)
    first = files.index(start.file) if start is not None and start.file is not None else 0
    skip = start.row if start is not None and start.file is not None else 0
    for file in files[first:]:
        rows = count_rows(file, stream.fmt) - skip
        if left < rows:
            return exc.located(stream.path, file, skip + left)
        left, skip = left - rows, 0
    return exc
