"""The compatibility suite's digests: each door's rows, for the comparison across pyspark lines.

The suite runs once per supported pyspark line, each in its own virtual environment
(``make test-compat``), on the local[2] session of ``tests/spark/conftest.py``. Each door's rows
are compared with the reference oracle in the tests, and their digest is written to
``$COMPAT_DIGESTS`` (when set) so that ``make test-compat`` can compare the lines too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def digests() -> Iterator[dict[str, str]]:
    """Door -> digest of its rows; written to ``$COMPAT_DIGESTS`` at the end of the session."""
    import pyspark

    found: dict[str, str] = {}
    yield found
    target = os.environ.get("COMPAT_DIGESTS")
    if target:
        with open(target, "w", encoding="utf-8") as out:
            json.dump({"pyspark": pyspark.__version__, "python": sys.version.split()[0],
                       "doors": found}, out, indent=1, sort_keys=True)
