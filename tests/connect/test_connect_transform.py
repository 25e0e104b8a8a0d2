"""``ordered(...).window(...).agg(...)`` defined in a Spark Connect client equals the oracle.

The client calls ``configure(spark)`` (two session settings, sent to the server) and defines the
query; ``transformWithStateInPandas`` runs ``OrderedProcessor`` in the server's Python workers.
Results go to a Parquet sink: a ``foreachBatch`` function would run in a Python process of the
server, not in the client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.spark.helpers import assert_matches_oracle, output_key
from tests.spark.test_transform import oracle, query, write_files

pytestmark = pytest.mark.connect


def test_windows_with_an_end_of_input_column_equal_the_oracle(connect: Any,
                                                              tmp_path: Path) -> None:
    tables = write_files(str(tmp_path / "in"), rows=120, files=2)
    started = (query(connect, str(tmp_path / "in"), max_files=2).writeStream.format("parquet")
               .option("path", str(tmp_path / "out"))
               .option("checkpointLocation", str(tmp_path / "ck"))
               .trigger(availableNow=True).start())
    started.awaitTermination(300)
    assert started.exception() is None
    rows = pq.read_table(tmp_path / "out").to_pylist()
    assert_matches_oracle(sorted(rows, key=output_key), oracle(tables))
    assert len(started.recentProgress) >= 2  # several micro-batches (two files per trigger)
