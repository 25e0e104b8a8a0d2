"""Errors a Spark Connect client sees: a bad option names itself, where Connect raises it.

A Connect client sends plans to the server only when it needs an answer, so
``spark.read...load()`` returns without error and the option error comes with the first action;
a streaming query's comes from ``start()``, which the server analyses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException

from tests.spark.helpers import source_options, write_inputs

pytestmark = pytest.mark.connect
FIRST_LINE = "spark_stream_sched.errors.ConfigError: unknown option 'numpartitons'"


def bad_options(tmp_path: Path) -> dict[str, str]:
    write_inputs(str(tmp_path / "in"), n_inputs=1, rows=50)
    return source_options(str(tmp_path / "in"), 1, str(tmp_path / "state"), numPartitons="3")


def test_a_bad_batch_read_option_fails_at_the_first_action(connect: Any, tmp_path: Path) -> None:
    frame = connect.read.format("ordered-agg").options(**bad_options(tmp_path)).load()
    with pytest.raises(AnalysisException, match="did you mean 'numPartitions'") as info:
        frame.collect()
    assert FIRST_LINE in str(info.value).splitlines()[0]


def test_a_bad_stream_option_fails_at_start(connect: Any, tmp_path: Path) -> None:
    frame = connect.readStream.format("ordered-agg").options(**bad_options(tmp_path)).load()
    writer = frame.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
    with pytest.raises(AnalysisException, match="did you mean 'numPartitions'") as info:
        writer.start()
    assert FIRST_LINE in str(info.value).splitlines()[0]
