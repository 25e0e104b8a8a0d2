"""Crash points: named steps where a test can make the process die (the fault-hook interface).

Code that writes durable state calls :func:`crash_point` between its steps, e.g.
``crash_point("sink.output_written", batch=3)``. Normally that is a dictionary lookup and an
environment lookup, and nothing happens. A test arms a step in one of two ways
(:mod:`spark_stream_sched.testing.faults` has the helpers):

* in-process, with :func:`arm` / :func:`disarm`: the step raises :class:`InjectedCrash`, a
  ``BaseException`` that no ``except Exception`` swallows, so nothing after the step runs -- as
  if the process had died there (the test then restarts from disk);
* across processes (a Spark driver or a Python worker started by Spark), with the environment
  variable ``SPARK_STREAM_SCHED_CRASH_AT`` set to ``step`` or ``step:name=value,...`` (e.g.
  ``sink.output_written:batch=0``): the step sends SIGKILL to the process group named by
  ``SPARK_STREAM_SCHED_CRASH_PGID`` -- a number, or ``session`` for the group whose id is this
  process's session id (start the driver with ``start_new_session=True``: its Python, the JVM
  it launches and that JVM's Python workers share the session, so the kill takes the whole
  driver down wherever the step runs) -- and then to the current process. With
  ``SPARK_STREAM_SCHED_CRASH_ONCE=<path>`` the crash fires only while ``<path>`` does not exist
  (it is created just before the kill), so the restarted process runs through.

Every named step is listed in :data:`STEPS`; a call with an unknown step name is a programming
error and raises ``ValueError``.
"""

from __future__ import annotations

import os
import signal

#: Every crash point in the code base, with what is durable when it fires.
STEPS: dict[str, str] = {
    "sink.claimed": "the sink state location names its owner; nothing of the batch written",
    "sink.state_written": "the batch's state version (files, manifest) is in place; no output",
    "sink.output_written": "state and the batch's Parquet output are in place; no marker",
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


def _known(step: str) -> str:
    if step not in STEPS:
        raise ValueError(f"unknown crash point {step!r}; known: {sorted(STEPS)}")
    return step


def arm(step: str, **match: object) -> None:
    """Make ``step`` raise :class:`InjectedCrash` in this process (where ``match`` holds)."""
    _armed[_known(step)] = {k: str(v) for k, v in match.items()}


def disarm(step: str) -> None:
    """Undo :func:`arm`."""
    _armed.pop(step, None)


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
        When armed in-process by :func:`arm`.
    ValueError
        When ``step`` is not in :data:`STEPS`.
    """
    if _known(step) in _armed and _matches(_armed[step], where):
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
