"""The soak test: many small micro-batches through Spark, the driver SIGKILLed again and again.

A small run of the soak harness (:mod:`tests.spark.soak`): three inputs through
``join(3, within=2 seconds, budget=4k); running(count(*) as rn)`` (a spilling join and a keyed
operator), 30 rows a batch, the whole driver process group SIGKILLed by a crash point and
restarted from its checkpoint:

* through the source: 120 micro-batches of 30 rows (141 with the default ``splitRows``, which
  for Parquet admits whole row groups where one fits), killed after batch 39 (when Spark has
  planned the next batch) and in batch 79 (after a task wrote the batch's state); memory judged
  within each of the three driver lives;
* through the sink: 30 micro-batches, ``keepMetrics=5``, killed in batch 9 (after its state)
  and in batch 18 (after its output); lives of 9 batches are too short to judge memory on, so
  only the location is judged here -- the long soak (docs/soak.md) judges memory longer.

The output must equal an uninterrupted run's, batch for batch (source) or file for file (sink),
and every judged series must be flat by the bounds of :mod:`tests.spark.soak_samples`. Six
driver starts (a JVM each) and the sink's shuffle per batch take most of its time: on this
project's 2-core machine at a load average of 16-21 (other test suites running) the source case
took 12 minutes and the sink case 10.5, a driver start 1.5-2 minutes of it (at a load average
of 1-8: ~1.3 s a source batch, 50-80 s a driver start).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .soak import (
    Soak,
    equal_to_uninterrupted,
    run_killed,
    source_reference,
    spill_dirs_left,
    write_inputs,
)
from .soak_samples import (
    figures,
    kill_times,
    lives,
    location_violations,
    memory_violations,
    read_samples,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.soak]


@pytest.mark.parametrize("soak", [Soak("source", 120, 40), Soak("sink", 30, 10, keep_metrics=5)],
                         ids=["source", "sink"])
def test_a_killed_stream_stays_flat_and_equals_the_uninterrupted_one(
        tmp_path: Path, soak: Soak) -> None:
    soak = Soak(soak.mode, soak.batches, soak.kill_every, work=tmp_path,
                keep_metrics=soak.keep_metrics)
    write_inputs(soak)
    run = run_killed(soak, timeout=600)
    assert run.kills == 2
    samples = read_samples(soak.samples)
    sampled = [s["batch_id"] for s in samples]
    # the source's default (splitRows=tasks for Parquet) admits whole row groups where one fits
    # in maxRecordsPerTrigger, so its batches are the uninterrupted run's, not soak.batches
    reference = source_reference(soak) if soak.mode == "source" else None
    planned = soak.batches if reference is None else len(reference)
    assert planned >= soak.batches
    assert sampled[-1] == planned - 1
    # the sink samples from a query listener, whose last event before a kill may be lost
    assert len(set(range(planned)) - set(sampled)) <= (run.kills if soak.mode == "sink"
                                                            else 0)
    kills = kill_times(soak.work)
    first, second, _ = lives(samples, kills)
    assert min(len(first), len(second)) >= soak.kill_every - 2, "a kill came early"
    assert equal_to_uninterrupted(soak, reference), "the killed run's output differs"
    # a kill leaves the spill directories of the joins its workers held (one per partition
    # group at most); before, every batch's restored join left one (docs/state_store.md)
    assert spill_dirs_left(soak) <= 4 * run.kills, spill_dirs_left(soak)
    found = location_violations(samples)
    if soak.mode == "source":
        found += memory_violations(samples, kills, min_life=30)
    assert found == [], (found, figures(samples, kills))
