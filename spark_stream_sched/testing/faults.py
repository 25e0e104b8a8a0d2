"""Failure injection for tests: arm the package's crash points, fill a disk.

The crash points themselves are the package's fault-hook interface,
:mod:`spark_stream_sched.faults`; :func:`inject_crash` arms one for a ``with`` block.
:func:`fill_disk` fills a (small, e.g. tmpfs) file system to its last byte, so the next durable
write fails with ``ENOSPC``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from spark_stream_sched.faults import (
    ENV_AT,
    ENV_ONCE,
    ENV_PGID,
    STEPS,
    InjectedCrash,
    arm,
    crash_point,
    disarm,
)

__all__ = ["ENV_AT", "ENV_ONCE", "ENV_PGID", "STEPS", "InjectedCrash", "crash_point",
           "fill_disk", "inject_crash"]


@contextlib.contextmanager
def inject_crash(step: str, **match: object) -> Iterator[None]:
    """Arm ``step`` in this process for the duration of the ``with`` block."""
    arm(step, **match)
    try:
        yield
    finally:
        disarm(step)


def fill_disk(directory: Path) -> Path:
    """Fill the file system holding ``directory`` to the last byte; return the filler file.

    Deleting the returned file frees the space again.
    """
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # unbuffered, so every block that fits is written
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler
