"""Crash points: deterministic failure injection at named steps (testing helper).

Code that writes durable state calls :func:`crash_point` between its steps, e.g.
``crash_point("sink.output_written", batch=3)``. Normally that is a dictionary lookup and
nothing happens. A test arms a crash point in one of two ways:

* in-process, with :func:`inject_crash` (a context manager): the step raises
  :class:`InjectedCrash`, a ``BaseException`` that no ``except Exception`` swallows, so nothing
  after the step runs — as if the process had died there (the test then restarts from disk);
* across processes (a Spark driver or a Python worker started by Spark), with the environment
  variable ``SPARK_STREAM_SCHED_CRASH_AT`` set to ``step`` or ``step:name=value,...`` (e.g.
  ``sink.output_written:batch=0``): the step sends SIGKILL to the process group named by
  ``SPARK_STREAM_SCHED_CRASH_PGID`` — a number, or ``session`` for the group whose id is this
  process's session id (start the driver with ``start_new_session=True``: its Python, the JVM
  it launches and that JVM's Python workers share the session, so the kill takes the whole
  driver down wherever the step runs) — and then to the current process. With
  ``SPARK_STREAM_SCHED_CRASH_ONCE=<path>`` the crash fires only while ``<path>`` does not exist
  (it is created just before the kill), so the restarted process runs through.

Every named step is listed in :data:`STEPS` so tests can iterate over all of them; a call with
an unknown step name is a programming error and raises ``ValueError``.

A full disk is a fault too: :func:`fill_disk` fills a (small, e.g. tmpfs) file system to its last
byte, so the next durable write fails with ``ENOSPC``.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

#: Every crash point in the code base, with what is durable when it fires.
STEPS: dict[str, str] = {
    "sink.claimed": "the sink state location names its owner; nothing of the batch written",
    "sink.output_written": "the batch's Parquet output file is in place; no state, no marker",
    "sink.state_written": "output and the new state version are in place; no commit marker",
    "sink.marker_written": "the commit marker is in place; staging not yet cleaned up",
    "source.planned": "Spark logged the batch's end offset; the batch has not been read",
    "source.state_written": "a partition's group state of the batch's end version is written",
}

ENV_AT = "SPARK_STREAM_SCHED_CRASH_AT"
ENV_PGID = "SPARK_STREAM_SCHED_CRASH_PGID"
ENV_ONCE = "SPARK_STREAM_SCHED_CRASH_ONCE"

_armed: dict[str, dict[str, str]] = {}


class InjectedCrash(BaseException):  # noqa: N818 - it is a crash, not an error
    """Raised by an armed in-process crash point; stands for the death of the process."""

    def __init__(self, step: str, where: dict[str, object]) -> None:
        super().__init__(f"injected crash at {step} {where}")
        self.step = step
        self.where = where


def _parse(spec: str) -> tuple[str, dict[str, str]]:
    step, _, rest = spec.partition(":")
    match = dict(item.split("=", 1) for item in rest.split(",") if item)
    return step.strip(), {k.strip(): v.strip() for k, v in match.items()}


def _matches(match: dict[str, str], where: dict[str, object]) -> bool:
    return all(str(where.get(k)) == v for k, v in match.items())


def crash_point(step: str, **where: object) -> None:
    """Crash here if a test armed ``step`` (optionally only where ``where`` matches).

    Raises
    ------
    InjectedCrash
        When armed in-process by :func:`inject_crash`.
    ValueError
        When ``step`` is not in :data:`STEPS`.
    """
    if step not in STEPS:
        raise ValueError(f"unknown crash point {step!r}; known: {sorted(STEPS)}")
    if step in _armed and _matches(_armed[step], where):
        raise InjectedCrash(step, where)
    spec = os.environ.get(ENV_AT)
    if not spec:
        return
    armed_step, match = _parse(spec)
    if armed_step != step or not _matches(match, where):
        return
    once = os.environ.get(ENV_ONCE)
    if once:
        if os.path.exists(once):
            return
        with open(once, "w", encoding="utf-8") as fh:
            fh.write(f"{step} {where}\n")
    pgid = os.environ.get(ENV_PGID)
    if pgid:
        os.killpg(os.getsid(0) if pgid == "session" else int(pgid), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def inject_crash(step: str, **match: object) -> Iterator[None]:
    """Arm ``step`` in this process for the duration of the ``with`` block."""
    if step not in STEPS:
        raise ValueError(f"unknown crash point {step!r}; known: {sorted(STEPS)}")
    _armed[step] = {k: str(v) for k, v in match.items()}
    try:
        yield
    finally:
        _armed.pop(step, None)


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
