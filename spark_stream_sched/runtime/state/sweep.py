"""What crashed writes leave behind, removed under the state location's lock (no pyspark).

Every durable file of the project is written through :mod:`~.atomic`: a temporary file beside
its target (``.<name>.<uuid>.tmp``), fsync, then a rename. A process killed between the two --
SIGKILL, the OOM killer, a lost executor -- leaves the temporary file behind. Nothing names it
and no later write replaces it (each write draws a fresh name), so without a sweep every crash
during a write would leave its bytes in the location for good.

:func:`sweep_temporaries` removes them. It is safe only where no write of the location can be
in flight, i.e. under the location's lock (:mod:`~.lock`) at a point where no task runs:

* the **source**'s driver sweeps at its first driver call of a run, when it takes the lock: no
  batch of this run is planned yet, and the tasks of an earlier run ended with its driver;
* the **sink**'s driver sweeps at every commit, which holds the lock: the batch's write tasks
  have ended and the next batch's have not started. It also sweeps its output directory, which
  the location's owner record gives to it.

The whole contract of what each file under a state location is, who deletes it and when, is the
table in docs/state_store.md ("Retention").
"""

from __future__ import annotations

import logging
import os

from spark_stream_sched.runtime.state.atomic import is_temporary

log = logging.getLogger(__name__)


def sweep_temporaries(root: str, recursive: bool = True) -> int:
    """Delete the temporary files of interrupted writes under ``root``; return how many.

    Only names of :func:`~.atomic.temp_path`'s form are touched (``.<name>.<32 hex>.tmp``);
    a missing ``root`` holds none. ``recursive`` False looks at ``root`` itself only (an output
    directory, whose subdirectories are not ours).
    """
    removed = 0
    for directory, _, names in _walk(root, recursive):
        for name in names:
            if is_temporary(name):
                try:
                    os.unlink(os.path.join(directory, name))
                    removed += 1
                except FileNotFoundError:
                    pass
    if removed:
        log.info("removed %d temporary file(s) of interrupted writes under %s", removed, root)
    return removed


def _walk(root: str, recursive: bool) -> list[tuple[str, list[str], list[str]]]:
    if recursive:
        return list(os.walk(root))
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return [(root, [], [e.name for e in entries if e.is_file(follow_symlinks=False)])]
