"""Modules shipped with ``--py-files`` or ``addPyFile``, importable by the source's driver side.

A ``udf(package.module:function)`` stage imports its module wherever the query's pipeline is
built, including the Python process that serves the stream reader's driver-side calls
(``streamReader()``, offsets, ``prepareForTriggerAvailableNow``, ``commit``). pyspark 4.3 starts
that process from the JVM (``pyspark/sql/streaming/python_streaming_source_runner.py``, whose
``main()`` calls ``setup_spark_files`` of ``pyspark/worker_util.py``), and the JVM side,
``org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner.init``, sends it
the Spark files directory through ``PythonWorkerUtils.writeSparkFiles(Some("streaming_job"),
...)``: a fixed job-artifact id, so the process puts ``<SparkFiles root>/streaming_job`` (and the
zips it was told about, under that directory) on ``sys.path``. Spark never writes there:
``SparkContext.addFile``, through which ``spark-submit --py-files`` (``spark.submit.pyFiles``)
and ``sparkContext.addPyFile`` ship files, copies them into the root itself. So a shipped module
was found by the executors' Python workers and by the driver's own interpreter, and not by this
process (``No module named ...`` at the query's start). :func:`reach_shipped_files` adds the
root, as every other Python worker of the session has it.
"""

from __future__ import annotations

import os
import sys

#: The job-artifact id pyspark 4.3's streaming source runner is given (see the module doc).
STREAMING_JOB = "streaming_job"
#: Shipped archives that go on ``sys.path`` (as ``SparkContext.addPyFile`` puts them).
ARCHIVES = (".zip", ".egg")


def spark_files_root() -> str | None:
    """The Spark files directory this Python worker was given (None: not a Spark worker)."""
    from pyspark.core.files import SparkFiles

    if not getattr(SparkFiles, "_is_running_on_worker", False):
        return None
    root = getattr(SparkFiles, "_root_directory", None)
    return root if isinstance(root, str) else None


def shipped_paths(root: str) -> list[str]:
    """The entries of ``sys.path`` the session's shipped files need, given the worker's root.

    Empty unless ``root`` is the streaming runner's ``<root>/streaming_job``; then the session's
    files directory, each archive the runner was told about (it added them under the wrong
    directory), and every ``.zip``/``.egg`` shipped into the session's directory.
    """
    if os.path.basename(os.path.normpath(root)) != STREAMING_JOB:
        return []
    session = os.path.dirname(os.path.normpath(root))
    told = [os.path.join(session, os.path.relpath(p, root)) for p in sys.path
            if p.startswith(root.rstrip(os.sep) + os.sep)]
    try:
        archives = sorted(os.path.join(session, n) for n in os.listdir(session)
                          if n.lower().endswith(ARCHIVES))
    except OSError:
        archives = []
    return list(dict.fromkeys([session, *told, *archives]))


def reach_shipped_files() -> list[str]:
    """Put the session's shipped files on ``sys.path`` in this worker; the entries added.

    Notes
    -----
    Called on the driver, in the stream reader's Python worker, before anything imports a user
    module. Entries go right after ``sys.path[0]``, where pyspark's ``add_path`` puts them; an
    entry already present is left where it is. Does nothing outside a Spark Python worker.
    """
    root = spark_files_root()
    added = [p for p in (shipped_paths(root) if root else []) if p not in sys.path]
    for position, path in enumerate(added, start=1):
        sys.path.insert(position, path)
        # A new entry gets a fresh finder on first use; only a finder cached for it earlier is
        # dropped. Not importlib.invalidate_caches(): it makes every zip importer re-read its
        # archive's directory (pyspark.zip), about 0.2 s of CPU at each query start here.
        sys.path_importer_cache.pop(path, None)
    return added
