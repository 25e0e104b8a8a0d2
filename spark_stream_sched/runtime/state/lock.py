"""One running query per state location: an exclusive ``flock`` on ``<location>/_lock``.

Both ends of the project use this one lock:

* the **source**'s driver takes it (:meth:`LocationLock.acquire`) before it plans its first
  batch and keeps it until the query stops (:meth:`LocationLock.release` from the reader's
  ``stop()``) or its process ends;
* the **sink** holds it for one commit (``with LocationLock(location, ...).hold():``) and
  fails at once when another process (or another committer in this process) holds it.

The kernel drops an ``flock`` when its holder dies, so a crash never leaves a stale lock
behind. The file holds the holder's pid, host, start time and role, for the message a second
query gets. No pyspark.

Measured on pyspark 4.3 (local mode): the driver methods of a Python stream reader run in one
Python process per query run, started by the JVM, which ends when the query stops; the reader is
*also* created by Spark's planner worker (a pooled process that outlives the query) to pickle
``read()`` for executors, so the source must take the lock lazily in a driver method, never in
``streamReader()``. The runner of a stopped query may need a moment to exit; :meth:`acquire`
waits up to :data:`WAIT_SECONDS` for the lock before refusing. Within one process a newer
source lock object on the same location takes the lock over from an older one (tests drive
several readers of one location in one process; Spark gives every query run its own driver-side
process); :meth:`hold` never takes over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator

from spark_stream_sched.errors import StateError

LOCK_FILE = "_lock"
#: How long a new source query waits for the lock (a stopping query's process to exit).
WAIT_SECONDS = 10.0

#: real path of a location -> the lock object of this process that holds it
_HELD: dict[str, LocationLock] = {}


class LocationLock:
    """An exclusive lock on one state location, held by ``what`` (e.g. ``"ordered-agg sink"``)."""

    def __init__(self, location: str, what: str = "ordered-agg source") -> None:
        self.location = location
        self.path = os.path.join(location, LOCK_FILE)
        self.what = what
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, wait_seconds: float = WAIT_SECONDS, take_over: bool = True) -> None:
        """Take the lock (idempotent); write this process's identity into the lock file.

        With ``take_over`` a lock object of this process that holds the same location hands
        its lock to this one.

        Raises
        ------
        StateError
            When another holder keeps it for ``wait_seconds``: names the location and the
            holder.
        """
        if self._fd is not None:
            return
        key = os.path.realpath(self.location)
        previous = _HELD.get(key)
        if take_over and previous is not None and previous._fd is not None:
            self._fd, previous._fd = previous._fd, None
            _HELD[key] = self
            return
        self._fd = self._wait_for_flock(wait_seconds)
        _HELD[key] = self
        self._write_holder(self._fd)

    def _wait_for_flock(self, wait_seconds: float) -> int:
        os.makedirs(self.location, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise self._refusal() from None
                time.sleep(0.1)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the ``with`` block; refuse at once when anyone else holds it."""
        self.acquire(wait_seconds=0.0, take_over=False)
        try:
            yield
        finally:
            self.release()

    def _write_holder(self, fd: int) -> None:
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "what": self.what}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)

    def holder(self) -> str:
        """Who holds the lock, as recorded in the lock file (best effort)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                info = json.load(fh)
            return (f"{info.get('what', 'a query')} with pid {info.get('pid')} on host "
                    f"{info.get('host')}, started {info.get('started')}")
        except (OSError, ValueError, AttributeError):
            return "another process (its identity could not be read)"

    def _refusal(self) -> StateError:
        return StateError(
            f"stateLocation {self.location!r} is in use by {self.holder()} (lock {self.path}); "
            f"two queries cannot share one state location — stop the other query first, or "
            f"give this query its own stateLocation and checkpointLocation")

    def release(self) -> None:
        """Give the lock up (also happens when the process ends)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        key = os.path.realpath(self.location)
        if _HELD.get(key) is self:
            del _HELD[key]
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
