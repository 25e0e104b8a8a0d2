"""Durable file primitives: atomic write, exclusive create, durable append (no pyspark).

Every durable file of the project is written by one of these three functions, so a crash never
leaves a half-written file under its final name and a full disk always gives a
:class:`~spark_stream_sched.errors.SpillError` naming the file:

* :func:`atomic_writer` / :func:`atomic_write` — write a hidden temporary file
  (``.<name>.<uuid>.tmp`` beside the target), fsync it, rename it over the target, fsync the
  directory. On failure the temporary file is removed and the target is untouched.
* :func:`create_exclusively` — the same, but only if the target does not exist yet (``link`` of
  a fully written temporary file, so two processes racing for a fresh name cannot both win).
* :func:`append_durably` — append to a log and fsync it; on failure the log is cut back to its
  old length.

:func:`read_bytes` reads a state file and turns a missing one into a
:class:`~spark_stream_sched.errors.StateError` naming it.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator

from spark_stream_sched.errors import SpillError, StateError

TEMP_SUFFIX = ".tmp"
#: Names :func:`temp_path` gives (``.<name>.<32 hex digits>.tmp``): a crashed write's leftovers.
TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")
_ADVICE = ("nothing was committed — free space on that file system (or fix its permissions) "
           "and restart the query from its checkpoint")


def _fsync_path(path: str) -> None:
    """Fsync a file or a directory by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    """Make renames and new entries in ``directory`` durable."""
    _fsync_path(directory)


def temp_path(path: str) -> str:
    """A fresh hidden temporary name beside ``path`` (never matched by ``*.<suffix>`` globs)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def is_temporary(name: str) -> bool:
    """Whether a file name is one :func:`temp_path` gives (a write in progress, or a crash's)."""
    return TEMP_NAME.match(name) is not None


def spill_error(path: str, exc: OSError, size: int | None = None) -> SpillError:
    """The error for a failed durable write of ``path``."""
    what = "" if size is None else f" ({size} bytes)"
    return SpillError(f"cannot write {path}{what}: {exc.strerror or exc}; {_ADVICE}")


@contextlib.contextmanager
def atomic_writer(path: str, sync_dir: bool = True) -> Iterator[str]:
    """Yield a temporary path to write; on success it replaces ``path`` atomically.

    The caller writes the whole file to the yielded path (e.g. ``pq.write_table(t, tmp)``);
    leaving the block fsyncs it, renames it to ``path`` and (unless ``sync_dir`` is False:
    the caller fsyncs the directory once after several writes) fsyncs the directory.

    Raises
    ------
    SpillError
        Any ``OSError`` inside the block or while committing (a full disk, permissions); it
        names ``path``. The temporary file is gone and ``path`` is untouched.
    """
    directory = os.path.dirname(path) or "."
    tmp = temp_path(path)
    try:
        os.makedirs(directory, exist_ok=True)
        yield tmp
        _fsync_path(tmp)
        os.replace(tmp, path)
        if sync_dir:
            fsync_dir(directory)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, StateError):
            raise spill_error(path, exc) from exc
        raise


def atomic_write(path: str, data: bytes, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`).

    Raises
    ------
    SpillError
        Naming ``path`` and the size, when it cannot be written; no temporary file is left.
    """
    try:
        with atomic_writer(path, sync_dir) as tmp, open(tmp, "wb") as fh:
            fh.write(data)
    except SpillError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError):
            raise spill_error(path, cause, len(data)) from cause
        raise


def create_exclusively(path: str, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; True when this call created it.

    Raises
    ------
    SpillError
        Naming ``path``, when it cannot be written.
    """
    tmp = temp_path(path)
    try:
        atomic_write(tmp, data, sync_dir=False)
    except SpillError as exc:
        if isinstance(exc.__cause__, OSError):  # name the file, not its temporary copy
            raise spill_error(path, exc.__cause__, len(data)) from exc.__cause__
        raise
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        raise spill_error(path, exc, len(data)) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(os.path.dirname(path) or ".")
    return True


def append_durably(path: str, data: bytes) -> None:
    """Append ``data`` to ``path`` and fsync it (and its directory when it is new).

    Raises
    ------
    SpillError
        Naming ``path``, when it cannot be written; the file is cut back to its old length
        (or removed, when this call created it).
    """
    directory = os.path.dirname(path) or "."
    created = not os.path.exists(path)
    old_size = 0 if created else os.path.getsize(path)
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "ab") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if created:
            fsync_dir(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            if created:
                os.unlink(path)
            else:
                os.truncate(path, old_size)
        raise spill_error(path, exc, len(data)) from exc


def read_bytes(path: str, what: str, advice: str) -> bytes:
    """Read a state file; a missing or unreadable one is a StateError naming it.

    ``what`` says what the file holds (e.g. ``"state of partition group 3"``), ``advice``
    what to do.
    """
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise StateError(f"{what} is missing: {path}; {advice}") from None
    except OSError as exc:
        raise StateError(f"{what} cannot be read: {path} ({exc.strerror or exc}); "
                         f"{advice}") from exc
