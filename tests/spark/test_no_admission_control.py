"""The source as pyspark 4.0 and 4.1 drive it: ``latestOffset()`` without a start or a limit.

Those lines have no admission control for Python sources, so the source's driver follows where
Spark stands and caps each batch by ``maxRecordsPerTrigger`` itself. The calls come in the order
pyspark 4.0.5 and 4.1.4 make them (recorded from a probe source; docs/deploy.md):

* fresh checkpoint: ``latestOffset()``, ``initialOffset()``, ``partitions(initial, end)``, ...;
* restart after a committed batch: ``partitions(L, L)`` (Spark names the last offset of its log,
  ``AcceptsLatestSeenOffset``), then ``latestOffset()``;
* restart after a batch that was logged but not committed: ``partitions(start, end)`` (the
  replay), then ``latestOffset()``;
* ``Trigger.AvailableNow``: one ``latestOffset()`` (Spark's wrapper), then one batch to it.

Every run must give the oracle's rows, in the same sequence as the 4.2+ calls give them. The
in-process readers run without a JVM.
"""

from __future__ import annotations

from typing import Any

from spark_stream_sched.inputs.offsets import parse_offset
from spark_stream_sched.spark.source import OrderedAggStreamReader

from .helpers import assert_matches_oracle, expected_rows, output_key, source_options, write_inputs
from .test_reader import make_reader, run_batches

Rows = list[dict[str, Any]]


def read_batch(reader: OrderedAggStreamReader, start: dict[str, Any],
               end: dict[str, Any]) -> Rows:
    return sorted((r for p in reader.partitions(start, end) for b in reader.read(p)
                   for r in b.to_pylist()), key=output_key)


def run_unprompted(reader: OrderedAggStreamReader, start: dict[str, Any] | None,
                   stop_after: int | None = None,
                   named: bool = False) -> tuple[list[Rows], dict[str, Any]]:
    """Batches as pyspark 4.0 plans them until the offset stops moving (or ``stop_after``).

    ``start`` is where the checkpoint stands (None: a fresh one); unless ``named``, Spark names
    it first (``setLatestSeenOffset`` on a restart). Returns the batches' rows and the last
    offset Spark logged.
    """
    batches: list[Rows] = []
    if start is not None and not named:
        reader.partitions(start, start)
    while stop_after is None or len(batches) < stop_after:
        end = reader.latestOffset()
        if start is None:
            start = reader.initialOffset()
        if end == start:
            break
        batches.append(read_batch(reader, start, end))
        reader.commit(start)  # Spark commits batch n - 1 when it has planned batch n
        start = end
    return batches, start


def total_rows(batch_offsets: dict[str, Any], n_inputs: int) -> int:
    return parse_offset(batch_offsets, n_inputs).total_seq


def test_the_driver_caps_each_batch_and_the_rows_are_those_of_admission_control(
        tmp_path: Any) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=90, endOfInput="exhausted")
    reader = make_reader(opts)
    batches, last = run_unprompted(reader, None)
    assert len(batches) >= -(-sum(t.num_rows for t in tables) // 90)
    flat = [r for b in batches for r in b]
    assert_matches_oracle(flat, expected_rows(tables))
    prompted = run_batches(make_reader({**opts, "stateLocation": str(tmp_path / "other")}),
                           available_now=False)
    assert [r for b in prompted for r in b] == flat  # the same sequence as 4.2+ gives


def test_restarts_after_a_committed_and_after_an_uncommitted_batch(tmp_path: Any) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=60, endOfInput="exhausted")
    first = make_reader(opts)
    done, logged = run_unprompted(first, None, stop_after=2)
    first.stop()
    second = make_reader(opts)  # a new driver process, restarted after a committed batch
    more, logged = run_unprompted(second, logged, stop_after=1)
    planned = second.latestOffset()  # Spark logs the next batch, and the process dies
    second.stop()
    third = make_reader(opts)  # restarted with that batch logged but not committed
    third.partitions(planned, planned)  # Spark names the last logged offset ...
    replayed = read_batch(third, logged, planned)  # ... and replays the batch
    rest, _ = run_unprompted(third, planned, named=True)
    third.stop()
    flat = [r for b in [*done, *more, replayed, *rest] for r in b]
    assert_matches_oracle(flat, expected_rows(tables))


def test_available_now_is_one_batch_of_everything_with_end_of_input_available_now(
        tmp_path: Any) -> None:
    tables = write_inputs(str(tmp_path / "in"), rows=200)
    opts = source_options(str(tmp_path / "in"), 3, str(tmp_path / "state"),
                          maxRecordsPerTrigger=50, endOfInput="availableNow")
    reader = make_reader(opts)
    end = reader.latestOffset()  # the wrapper's one call, before initialOffset
    start = reader.initialOffset()
    assert total_rows(end, 3) == sum(t.num_rows for t in tables)
    assert all(c.finished for c in parse_offset(end, 3).cursors)
    assert_matches_oracle(read_batch(reader, start, end), expected_rows(tables))
