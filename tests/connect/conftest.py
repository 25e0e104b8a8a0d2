"""Fixtures of the Spark Connect tests: one real Connect server, one Connect client session.

The server is started once per pytest run from the installed pyspark (``server.py``) in a
temporary directory, with ``PYSPARK_PYTHON`` set to this interpreter, so its Python workers
import this checkout's package and find ``format("ordered-agg")`` by themselves
(``pyspark_ordered_agg``). The client is ``SparkSession.builder.remote("sc://...")``, as a user
writes it; nothing else is configured on the server for the plugin.

A Python process holds either a classic SparkContext or a Connect client: creating a Connect
session marks the whole process as Connect (``SPARK_CONNECT_MODE_ENABLED``), and a process with
a SparkContext refuses a Connect session (``SESSION_ALREADY_EXIST``). These tests therefore run
in a pytest process of their own (``make test-connect``, or ``pytest -m connect``); when other
tests are selected with them, they are skipped with a reason that says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .server import ConnectServer, start_server, stop_server

_ALONE = ("Spark Connect tests run in a pytest process of their own (a process holds either a "
          "classic SparkContext or a Connect client): make test-connect, or pytest -m connect")


@pytest.hookimpl(trylast=True)  # after ``-m`` / ``-k`` have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the Connect tests when tests of other kinds share this process (see module doc)."""
    connect = [item for item in items if item.get_closest_marker("connect")]
    if connect and len(connect) < len(items):
        for item in connect:
            item.add_marker(pytest.mark.skip(reason=_ALONE))


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    server = start_server(tmp_path_factory.mktemp("connect-server"))
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture(scope="session")
def connect(connect_server: ConnectServer) -> Iterator[Any]:
    """A Spark Connect client session on the test server."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(connect_server.url).getOrCreate()
    try:
        assert spark.range(3).count() == 3, connect_server.log_tail()
        yield spark
    finally:
        spark.stop()
