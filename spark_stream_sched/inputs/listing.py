"""The one listing rule: which files make up an input, and in which order.

An input path is

* a directory: its regular files in **name order**, hidden ``.*`` and ``_*`` files (``_SUCCESS``,
  ``.part-0.crc``) skipped — the same convention as Spark's file sources;
* a glob (it holds ``*``, ``?`` or ``[``): its matching regular files in **path order**, hidden
  names skipped likewise;
* a single regular file: that file.

The order is the stream order. No file is filtered by its suffix: every listed file is read in
the input's format, so a stray file fails naming itself instead of vanishing from the stream.

Pure Python (no pyspark).
"""

from __future__ import annotations

import glob
import os

from spark_stream_sched.errors import InputError

_GLOB_CHARS = frozenset("*?[")


def _visible(path: str) -> bool:
    return os.path.isfile(path) and not os.path.basename(path).startswith((".", "_"))


def list_files(path: str) -> list[str]:
    """Return the files of one input in stream order (see the module docstring).

    Raises
    ------
    InputError
        ``path`` is neither a directory, a file nor a glob (a glob may match nothing yet).
    """
    path = os.fspath(path)
    if _GLOB_CHARS & set(path):
        return [m for m in sorted(glob.glob(path)) if _visible(m)]
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise InputError(f"input path {path!r} is neither a directory, a file nor a glob; create "
                         f"the directory (it may start empty) or fix the input path")
    return [os.path.join(path, n) for n in sorted(os.listdir(path))
            if _visible(os.path.join(path, n))]


def file_identity(path: str) -> tuple[str, int, int]:
    """``(path, size, mtime_ns)`` of an input file (the key of the row-count cache).

    Raises
    ------
    InputError
        The file has disappeared (files of an input must stay until they are consumed).
    """
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"input file {path!r} has disappeared; files of an input must stay "
                         f"until the query has consumed and committed them") from None
    return path, stat.st_size, stat.st_mtime_ns
