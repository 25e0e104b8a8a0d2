"""Fixtures for the Spark adapter tests: one local[2] SparkSession per test session.

``PYSPARK_PYTHON`` and ``SPARK_LOCAL_IP`` are set before the JVM starts so Python workers use this
interpreter and Spark binds to loopback. pytest-spark's ``spark_session`` fixture is overridden
to return the same session, so tests written against either name share one JVM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("spark_stream_sched-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_session(spark: Any) -> Any:
    return spark
