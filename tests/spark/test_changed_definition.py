"""Restarting on a stateLocation with a changed definition: one clear message, first line first.

The spec recorded at first start (``runtime/query/recorded.py``) is compared at ``load()``; the
message names the option as the user wrote it (``window``, not ``window_ms``), both values and
what to do, and reaches the user without pyspark's ``UnboundLocalError`` or a traceback in front
of it.
"""

from __future__ import annotations

import pytest

from spark_stream_sched.errors import ConfigError

from .helpers import run_available_now, source_options, start_query, write_inputs
from .test_reader import make_reader, run_batches

FIRST_LINE = ("window is '1 minute' but the query in stateLocation {state!r} was started with "
              "window '10 seconds': set window back to '10 seconds', or start the changed query "
              "with a new stateLocation and a new checkpointLocation")


def test_changed_window_is_refused_naming_window(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=60)
    state = str(tmp_path / "state")
    run_batches(make_reader(source_options(str(tmp_path / "in"), 3, state)))
    changed = source_options(str(tmp_path / "in"), 3, state, window="1 minute",
                             aggregates="count(*) as n")
    with pytest.raises(ConfigError) as info:
        make_reader(changed)
    lines = str(info.value).splitlines()
    assert lines[0] == FIRST_LINE.format(state=state)
    assert lines[1].startswith("also changed: aggregates is 'count(*) as n', was ")


def test_same_definition_in_other_words_restarts(tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=60)
    state = str(tmp_path / "state")
    run_batches(make_reader(source_options(str(tmp_path / "in"), 3, state)))
    same = source_options(str(tmp_path / "in"), 3, state, window="interval 10 seconds",
                          slide="5000 milliseconds", numPartitions=1, scheduler="fifo")
    make_reader(same)  # execution options may change; the definition did not


@pytest.mark.spark
def test_changed_window_in_a_real_spark_query(spark, tmp_path) -> None:
    write_inputs(str(tmp_path / "in"), rows=60)
    state, checkpoint = str(tmp_path / "state"), str(tmp_path / "ckpt")
    run_available_now(spark, source_options(str(tmp_path / "in"), 3, state), checkpoint)
    changed = source_options(str(tmp_path / "in"), 3, state, window="1 minute")
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's AnalysisException
        start_query(spark, changed, checkpoint, [])
    message = str(info.value)
    assert "UnboundLocalError" not in message
    assert "Traceback" not in message
    first_line = message.splitlines()[0]
    assert first_line.endswith("ConfigError: " + FIRST_LINE.format(state=state)), message
