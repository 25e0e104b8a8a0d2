"""The one listing rule: which files make up an input, and in which order.

An input path is

* an existing directory: its regular files in **name order**, hidden ``.*`` and ``_*`` files
  (``_SUCCESS``, ``.part-0.crc``) skipped -- the same convention as Spark's file sources;
* an existing regular file: that file;
* otherwise a glob (it holds ``*``, ``?`` or ``[``): its matching regular files in **path
  order**, skipping every match with a hidden component (``.*`` or ``_*``) below the glob's
  *root*, the directory its pattern starts in (the path up to the first component that holds
  a wildcard). So ``/data/*/part-*`` skips ``/data/_temporary/0/part-0``, as Spark does.

An existing path is taken literally even when its name holds ``[``, ``*`` or ``?`` (a
directory ``meter[1]``): a path that names something is never reinterpreted as a pattern.

The order is the stream order. No file is filtered by its suffix: every listed file is read in
the input's format, so a stray file fails naming itself instead of vanishing from the stream.

A glob may match nothing yet while more files can arrive (a streaming input). Where the input
is read as finished -- a static snapshot (the CLI, the jobs), a batch read, a source input that
``endOfInput`` finishes -- a glob that matches nothing is an error
(:func:`list_finished_files`, :func:`empty_glob_error`): it is far more often a wrong pattern
than an input that is meant to be empty, and reading it as empty would lose the rows it was
meant to hold without a word.

Pure Python (no pyspark).
"""

from __future__ import annotations

import glob
import os

from spark_stream_sched.errors import InputError

_GLOB_CHARS = frozenset("*?[")
_HIDDEN = (".", "_")


def is_glob(path: str) -> bool:
    """Whether ``path`` is read as a glob: it holds a wildcard and names nothing that exists."""
    return bool(_GLOB_CHARS & set(path)) and not os.path.lexists(path)


def glob_root(pattern: str) -> str:
    """The directory a glob starts in: its leading components that are not patterns.

    A component is not a pattern when it holds no wildcard or, with those before it, names an
    existing directory as it is (``/data/meter[1]`` in ``/data/meter[1]/*.parquet``).
    """
    parts = pattern.split(os.sep)
    root = 0
    while root < len(parts) - 1 and (not _GLOB_CHARS & set(parts[root])
                                     or os.path.isdir(os.sep.join(parts[: root + 1]))):
        root += 1
    return os.sep.join(parts[:root]) or (os.sep if pattern.startswith(os.sep) else "")


def _hidden(name: str) -> bool:
    return name.startswith(_HIDDEN)


def _visible_match(root: str, match: str) -> bool:
    below = os.path.relpath(match, root or os.curdir).split(os.sep)
    return os.path.isfile(match) and not any(_hidden(part) for part in below)


def list_files(path: str) -> list[str]:
    """Return the files of one input in stream order (see the module docstring).

    Raises
    ------
    InputError
        ``path`` is neither a directory, a file nor a glob (a glob may match nothing yet).
    """
    path = os.fspath(path)
    if is_glob(path):
        root = glob_root(path)
        pattern = glob.escape(root) + path[len(root):]  # an existing prefix is literal
        return [m for m in sorted(glob.glob(pattern)) if _visible_match(root, m)]
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise InputError(f"input path {path!r} is neither a directory, a file nor a glob; create "
                         f"the directory (it may start empty) or fix the input path")
    return [os.path.join(path, n) for n in sorted(os.listdir(path))
            if not _hidden(n) and os.path.isfile(os.path.join(path, n))]


def empty_glob_error(path: str, why: str) -> InputError:
    """The error for a glob input that matches no file where the input counts as finished.

    ``why`` says why the input counts as finished (e.g. ``"a batch read reads it once"``).
    """
    return InputError(
        f"input glob {path!r} matches no file, and {why}: reading it as an empty input would "
        f"lose the rows it was meant to hold; fix the pattern (hidden '_'/'.' components "
        f"below {glob_root(path) or os.curdir!r} are skipped), or name an existing directory")


def list_finished_files(path: str, why: str = "the input is read once, as it is now") -> list[str]:
    """:func:`list_files` of an input read as finished: a glob that matches nothing is an error.

    Raises
    ------
    InputError
        As :func:`list_files`, or ``path`` is a glob that matches no file
        (:func:`empty_glob_error`).
    """
    files = list_files(path)
    if not files and is_glob(os.fspath(path)):
        raise empty_glob_error(os.fspath(path), why)
    return files


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
