"""The query definition recorded in a state location: ``<location>/_query.json``.

Written once, when a query first starts, as checksummed JSON (:mod:`~.records`); read at every
later start, where :mod:`spark_stream_sched.runtime.query.recorded` compares it with the
configured query and refuses a changed one. This module only stores and loads it.
"""

from __future__ import annotations

import os
from typing import Any

from spark_stream_sched.runtime.state.atomic import atomic_write
from spark_stream_sched.runtime.state.records import read_record, seal

QUERY_FILE = "_query.json"


def record_query(location: str, definition: dict[str, Any]) -> None:
    """Write ``definition`` as ``location``'s query record unless one exists.

    Notes
    -----
    Called on the driver when a query is defined or started, after the caller compared the
    record (if any) with the configured query.
    """
    path = os.path.join(location, QUERY_FILE)
    if not os.path.exists(path):
        atomic_write(path, seal(definition, indent=1))


def read_query(location: str) -> dict[str, Any]:
    """The recorded query definition; StateError naming the file if unusable."""
    return read_record(os.path.join(location, QUERY_FILE), "the recorded query definition",
                       "restore the file or use a new stateLocation and checkpointLocation")
