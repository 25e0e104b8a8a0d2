"""One lock class for every state location: the source holds it for the query's life, the sink
for one commit (two reported defects). Pure: no JVM.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.lock import LocationLock

HOLD = """
import sys, time
from spark_stream_sched.runtime.state.lock import LocationLock
lock = LocationLock(sys.argv[1]); lock.acquire(); print("held", flush=True); time.sleep(60)
"""


def test_a_second_process_is_refused_naming_the_location_and_holder(tmp_path) -> None:
    location = str(tmp_path / "state")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, location], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StateError, match=rf"stateLocation '{location}' is in use by "
                                             rf".*pid {holder.pid} on host"):
            LocationLock(location).acquire(wait_seconds=0.3)
    finally:
        holder.kill()
        holder.wait()
    lock = LocationLock(location)  # a dead holder leaves no stale lock
    lock.acquire(wait_seconds=5)
    assert lock.held
    lock.release()


def test_the_lock_is_taken_over_within_one_process(tmp_path) -> None:
    first, second = LocationLock(str(tmp_path)), LocationLock(str(tmp_path))
    first.acquire()
    second.acquire(wait_seconds=0)
    assert second.held
    assert not first.held
    first.release()  # releasing a lock no longer held is a no-op
    second.release()


def test_a_commit_lock_is_refused_while_anyone_holds_it(tmp_path) -> None:
    """The sink's per-commit hold never takes over, not even from this process."""
    source = LocationLock(str(tmp_path))
    source.acquire()
    sink_lock = LocationLock(str(tmp_path), "ordered-agg sink")
    with pytest.raises(StateError, match=r"is in use by ordered-agg source with pid"), \
            sink_lock.hold():
        pass  # pragma: no cover
    assert source.held
    source.release()
    committer = LocationLock(str(tmp_path), "ordered-agg sink")
    with committer.hold():
        assert committer.held
        with pytest.raises(StateError, match=r"in use by ordered-agg sink with pid"):
            LocationLock(str(tmp_path), "ordered-agg sink").acquire(0, take_over=False)
    assert not committer.held


def test_a_commit_lock_is_released_when_the_commit_fails(tmp_path) -> None:
    committer = LocationLock(str(tmp_path), "ordered-agg sink")
    with pytest.raises(RuntimeError), committer.hold():
        raise RuntimeError("commit failed")
    with LocationLock(str(tmp_path), "ordered-agg sink").hold():
        pass
