"""The source's owner record: a state location serves the checkpoint that first planned a batch.

Before, a source ``stateLocation`` reused with a new checkpoint (the old one deleted, or a
second query with its own) was silently recomputed from scratch over the old versions. Now the
offsets a checkpoint logs carry the owner token drawn at its ``initialOffset``, and the
location refuses the offsets -- or the fresh start -- of another query, naming both and what to
do (``runtime/state/owner.py``, shared with the sink).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.owner import SOURCE, read_owner

from .helpers import run_to_end, source_options, start_query, write_inputs
from .test_retention import location_size, stream_reader


def run_batches(reader: Any, batches: int, start: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """Plan, read and commit ``batches`` batches of 150 rows; the offset reached."""
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset() if start is None else start
    for _ in range(batches):
        end = reader.latestOffset(start, ReadMaxRows(150))
        for part in reader.partitions(start, end):
            list(reader.read(part))
        reader.commit(end)
        start = end
    return start


@pytest.fixture
def opts(tmp_path: Path) -> dict[str, str]:
    write_inputs(str(tmp_path / "in"), rows=300)
    return source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"))


def test_a_fresh_checkpoint_on_a_used_location_is_refused_naming_both(
        tmp_path: Path, opts: dict[str, str]) -> None:
    reached = run_batches(stream_reader(opts), 2)
    owner = read_owner(opts["stateLocation"], SOURCE)
    assert owner is not None
    assert owner["confirmed"]
    assert owner["token"] == reached["owner"]
    before = location_size(tmp_path / "state")
    with pytest.raises(StateError) as info:
        stream_reader(opts).initialOffset()  # what Spark asks a fresh checkpoint
    first = str(info.value).splitlines()[0]
    assert first.startswith(f"ordered-agg source stateLocation {tmp_path / 'state'} belongs to "
                            f"another query (the query whose checkpoint offsets carry owner "
                            f"token {reached['owner']}, first started ")
    assert "this query has a fresh checkpointLocation" in first
    assert first.endswith("restart the original query from its own checkpointLocation, or give "
                          "this query a new stateLocation (a fresh checkpointLocation over an "
                          "old stateLocation would recompute every batch over the old query's "
                          "state)")
    assert location_size(tmp_path / "state") == before  # nothing written or deleted

    # the original query restarts from its checkpoint: its offsets carry the token
    assert run_batches(stream_reader(opts), 1, start=reached)["owner"] == reached["owner"]


def test_offsets_of_another_query_are_refused_before_anything_is_planned(
        tmp_path: Path, opts: dict[str, str]) -> None:
    original = stream_reader(opts)
    reached = run_batches(original, 1)
    later = original.latestOffset(reached, ReadMaxRows(150))
    foreign = {**reached, "owner": "0" * 32}
    foreign_later = {**later, "owner": "0" * 32}
    reader = stream_reader(opts)
    for call in (lambda: reader.latestOffset(foreign, ReadMaxRows(150)),
                 lambda: reader.partitions(foreign, foreign_later),
                 lambda: reader.commit(foreign)):
        with pytest.raises(StateError, match=f"this query has checkpoint offsets that carry "
                                             f"owner token {'0' * 32}. Two queries cannot"):
            call()


def test_a_location_that_planned_nothing_can_be_taken_over(opts: dict[str, str]) -> None:
    # The first query died after initialOffset, before Spark logged an offset: its checkpoint
    # holds none, so its restart (or another query) asks for the initial offset again.
    died = stream_reader(opts)
    token = died.initialOffset()["owner"]
    assert died.initialOffset()["owner"] == token  # Spark asks twice per run: one token
    restarted = stream_reader(opts)
    again = restarted.initialOffset()["owner"]
    assert again != token
    assert run_batches(restarted, 1, start=restarted.initialOffset())["owner"] == again


def died_then_restarted(opts: dict[str, str]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """A query that died once Spark logged batch 0's end, and its restart's reader.

    Returns the logged end offset, the restart's reader and the initial offset it gave.
    """
    died = stream_reader(opts)
    died.prepareForTriggerAvailableNow()
    logged = died.latestOffset(died.initialOffset(), ReadMaxRows(150))
    restarted = stream_reader(opts)
    restarted.prepareForTriggerAvailableNow()
    return logged, restarted, restarted.initialOffset()


def test_a_query_killed_before_its_first_batch_was_planned_restarts(
        opts: dict[str, str]) -> None:
    # Spark logged batch 0's end offset, then the driver died before planning it (the source
    # kill test's SIGKILL at source.planned:batch=0). The restart asks for the initial offset
    # again (batch 0 starts there), drawing a new token, and plans the logged offset, which
    # carries the first run's token: before, that was refused as another query's.
    logged, restarted, start = died_then_restarted(opts)
    assert start["owner"] != logged["owner"]
    for part in restarted.partitions(start, logged):
        list(restarted.read(part))
    restarted.commit(logged)
    owner = read_owner(opts["stateLocation"], SOURCE)
    assert owner is not None
    assert (owner["token"], owner["confirmed"]) == (logged["owner"], True)
    assert run_batches(restarted, 1, start=logged)["owner"] == logged["owner"]
    with pytest.raises(StateError, match="this query has a fresh checkpointLocation"):
        stream_reader(opts).initialOffset()  # confirmed: a fresh query is refused


def test_a_location_claimed_since_refuses_the_first_runs_logged_offset(
        opts: dict[str, str]) -> None:
    logged, restarted, start = died_then_restarted(opts)
    other = stream_reader(opts)  # another fresh query claims the location in between
    other_start = other.initialOffset()
    with pytest.raises(StateError, match=f"carry owner token {logged['owner']}"):
        restarted.partitions(start, logged)
    assert run_batches(other, 1, start=other_start)["owner"] == other_start["owner"]


def test_offsets_of_an_earlier_release_are_adopted_once(tmp_path: Path,
                                                        opts: dict[str, str]) -> None:
    # An earlier release logged offsets without a token and wrote no owner record.
    reached = run_batches(stream_reader(opts), 1)
    legacy_opts = {**opts, "stateLocation": str(tmp_path / "legacy")}
    legacy = stream_reader(legacy_opts)
    legacy.prepareForTriggerAvailableNow()
    start = {k: v for k, v in legacy.initialOffset().items() if k != "owner"} | {"version": 2}
    (tmp_path / "legacy" / SOURCE.file).unlink()  # before owner records: none
    end = legacy.latestOffset(start, ReadMaxRows(150))  # a restart handed its legacy offset
    owner = read_owner(str(tmp_path / "legacy"), SOURCE)
    assert owner is not None
    assert owner["adopted"]
    assert end["owner"] == owner["token"]
    legacy.latestOffset(start, ReadMaxRows(150))  # still accepted (a replay, a restart)
    with pytest.raises(StateError, match="offsets of an earlier release, without an owner"):
        stream_reader(opts).latestOffset(
            {k: v for k, v in reached.items() if k != "owner"} | {"version": 2},
            ReadMaxRows(150))
    assert json.loads((tmp_path / "legacy" / SOURCE.file).read_text())["token"] == end["owner"]


@pytest.mark.spark
def test_a_second_query_with_a_fresh_checkpoint_fails_through_spark(
        spark: Any, tmp_path: Path, opts: dict[str, str]) -> None:
    first = start_query(spark, opts, str(tmp_path / "ck-a"), [])
    assert run_to_end(first) is None
    versions = sorted(p.name for p in (tmp_path / "state" / "versions").iterdir())
    second = start_query(spark, opts, str(tmp_path / "ck-b"), [])
    error = run_to_end(second)
    assert error is not None, "a second query recomputed the first one's state location"
    line = str(error).splitlines()[0]  # Spark's prefix, then ours: no traceback in between
    assert (f"initialOffset: spark_stream_sched.errors.StateError: ordered-agg source "
            f"stateLocation {tmp_path / 'state'} belongs to another query") in line
    assert "this query has a fresh checkpointLocation" in line
    assert "restart the original query from its own checkpointLocation, or give this query a " \
           "new stateLocation" in line
    assert sorted(p.name for p in (tmp_path / "state" / "versions").iterdir()) == versions
    assert run_to_end(start_query(spark, opts, str(tmp_path / "ck-a"), [])) is None  # restart
