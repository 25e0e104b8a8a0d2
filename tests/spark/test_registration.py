"""Auto-registration: pyspark registers ``DefaultSource`` of installed ``pyspark_*`` modules.

pyspark's lookup worker (``pyspark/sql/worker/lookup_data_sources.py``) walks
``pkgutil.iter_modules()`` for names starting with ``pyspark_`` and registers each module's
``DefaultSource`` under its ``name()``. These tests replay that lookup without a JVM.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import import_module
from pkgutil import iter_modules

from pyspark.sql.datasource import DataSource

from spark_stream_sched.spark.datasource import OrderedAggDataSource

LOOKUP = """
from importlib import import_module
from pkgutil import iter_modules
found = {}
for info in iter_modules():
    if info.name.startswith("pyspark_"):
        module = import_module(info.name)
        if hasattr(module, "DefaultSource"):
            found[info.name] = module.DefaultSource.name()
print(found)
"""


def test_pyspark_lookup_finds_the_ordered_agg_default_source() -> None:
    names = [m.name for m in iter_modules() if m.name.startswith("pyspark_")]
    assert "pyspark_ordered_agg" in names
    source = import_module("pyspark_ordered_agg").DefaultSource
    assert issubclass(source, DataSource)
    assert source.name() == "ordered-agg"
    assert issubclass(source, OrderedAggDataSource)
    assert "streamWriter" in vars(OrderedAggDataSource)  # the one format reads and writes


def test_lookup_works_outside_the_repository(tmp_path) -> None:
    # A finder-based editable install (setuptools' default) would hide the module from
    # iter_modules() here; the Makefile installs with editable_mode=compat for that reason.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", LOOKUP], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert "'pyspark_ordered_agg': 'ordered-agg'" in found
