"""The sink's catch-up reads how far each group released from ``R`` and the query's hold."""

from __future__ import annotations

from spark_stream_sched.runtime.engine.sink_batch import Previous, released_to
from spark_stream_sched.runtime.packets import EVENT_TIME_MIN, TS_MAX


def test_a_group_releases_below_the_smaller_of_the_bound_and_the_hold() -> None:
    assert released_to(None, 5) is None  # nothing released before the first bound
    assert released_to(10, None) == 10
    assert released_to(10, 5) == 5
    assert released_to(10, 50) == 10
    # every input finished: the batch ignores the hold and releases everything, so a group a
    # task ran to a lower bound under the hold is behind it however high that hold was
    assert released_to(TS_MAX, 5) == TS_MAX
    assert released_to(TS_MAX, 5) > released_to(10**6, 5)


def test_the_marker_records_the_hold_and_an_older_marker_catches_every_group_up_once() -> None:
    base = {"version": "batch-1", "input_max": [3, 4], "ready_bound": 3}
    assert Previous.of(None, 2).hold is None  # before the first batch
    assert Previous.of({**base, "release_hold": 2}, 2).hold == 2
    assert Previous.of({**base, "release_hold": None}, 2).hold is None
    # written before ``release_hold`` existed: the hold it ran under is unknown, so every
    # group counts as released to nothing and the next commit runs each one to its bound
    old = Previous.of(base, 2)
    assert old.hold == EVENT_TIME_MIN
    assert released_to(old.bound, old.hold) == EVENT_TIME_MIN
