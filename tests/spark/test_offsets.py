"""Offsets: JSON with a fixed key order and a version; clear errors (pure: no JVM)."""

from __future__ import annotations

import json

import pytest

from spark_stream_sched.errors import StateError
from spark_stream_sched.inputs import Cursor
from spark_stream_sched.inputs.offsets import Offset, parse_offset, version_id
from spark_stream_sched.runtime.packets import TS_MAX


def test_round_trip_and_fixed_key_order() -> None:
    offset = Offset((Cursor("/d/a/p1.parquet", 7, 107, 1_000, False),
                     Cursor(None, 0, 0, None, True)), "5f0c")
    text = offset.text()
    assert text.startswith('{"format":"ordered-agg-offset","version":3,"owner":"5f0c",'
                           '"inputs":[{"file":')
    assert list(json.loads(text)["inputs"][0]) == ["file", "row", "seq", "last_ts", "finished",
                                                   "idle"]
    assert parse_offset(text, 2) == offset
    assert parse_offset(json.loads(text), 2).owner == "5f0c"


def test_offsets_of_an_earlier_release_have_no_owner_and_keep_their_version_ids() -> None:
    cursors = (Cursor("/d/a/p1.parquet", 7, 107, 1_000, False),)
    legacy = ('{"format":"ordered-agg-offset","version":2,"inputs":[{"file":"/d/a/p1.parquet",'
              '"row":7,"seq":107,"last_ts":1000,"finished":false,"idle":false}]}')
    parsed = parse_offset(legacy, 1)
    assert parsed == Offset(cursors)
    assert parsed.owner is None
    assert parsed.text() == legacy  # the version id of its state is the one it had
    assert version_id(parsed) != version_id(Offset(cursors, "5f0c"))


def test_ready_bound_is_min_of_unfinished_inputs() -> None:
    a, b = Cursor("f", 1, 1, 500, False), Cursor("g", 1, 1, 300, False)
    assert Offset((a, b)).ready_bound() == 300
    assert Offset((a, Cursor(finished=True))).ready_bound() == 500
    assert Offset((a, Cursor())).ready_bound() is None  # an input that sent nothing blocks
    assert Offset((Cursor(finished=True),) * 2).ready_bound() == TS_MAX


def test_idle_inputs_do_not_hold_back_the_ready_bound() -> None:
    active, idle = Cursor("f", 1, 1, 500, False), Cursor("g", 1, 1, 300, False, idle=True)
    assert Offset((active, idle)).ready_bound() == 500
    assert Offset((active, Cursor(idle=True))).ready_bound() == 500  # idle and never sent
    assert Offset((idle, Cursor("h", 1, 1, 400, False, idle=True))).ready_bound() == 400
    assert Offset((Cursor(idle=True), Cursor(finished=True))).ready_bound() is None


def test_version_ids_sort_in_batch_order() -> None:
    first = Offset((Cursor("f", 9, 9, 5, False),))
    later = Offset((Cursor("f", 10, 10, 5, False),))
    assert version_id(first) < version_id(later)
    assert version_id(first) == version_id(parse_offset(first.text(), 1))


@pytest.mark.parametrize(("raw", "message"), [
    ("not json", "offset log is not valid JSON"),
    ({"format": "kafka"}, "'format' is not 'ordered-agg-offset'"),
    ({"format": "ordered-agg-offset", "version": 9, "inputs": []}, "version 9 is not supported"),
    ({"format": "ordered-agg-offset", "version": 3, "inputs": []}, "'owner' must be a token"),
    ({"format": "ordered-agg-offset", "version": 2, "owner": "x", "inputs": []},
     "'owner' must be a token in version 3 and absent before"),
    ({"format": "ordered-agg-offset", "version": 2, "inputs": [{"file": None}]},
     "a cursor must have the keys"),
    ({"format": "ordered-agg-offset", "version": 2,
      "inputs": [{"file": None, "row": -1, "seq": 0, "last_ts": None, "finished": False,
                  "idle": False}]},
     "wrong type"),
    ({"format": "ordered-agg-offset", "version": 2,
      "inputs": [{"file": None, "row": 0, "seq": 0, "last_ts": None, "finished": False,
                  "idle": "no"}]},
     "wrong type"),
])
def test_malformed_offsets_are_state_errors(raw: object, message: str) -> None:
    with pytest.raises(StateError, match=message):
        parse_offset(raw, 1)


def test_input_count_change_is_refused() -> None:
    with pytest.raises(StateError, match="has 1 input cursors but option inputs names 2"):
        parse_offset(Offset.initial(1).text(), 2)
