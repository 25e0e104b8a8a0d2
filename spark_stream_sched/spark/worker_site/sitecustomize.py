"""Runs at the start of every Spark Python worker that has this directory on its PYTHONPATH.

pyspark's driver-side worker of ``transformWithStateInPandas``
(``pyspark.sql.streaming.transform_with_state_driver_worker``, started once per query start to
run the stateful processor's ``init``) prints its progress ("Starting Streaming
TransformWithStateInPandas Python worker." and four more lines, each followed by a blank line)
to its stdout, and Spark copies a worker's stdout byte for byte to the driver's standard error
(``PythonWorkerFactory``'s redirect threads write to ``System.err``, past log4j, so no logging
setting reaches them). In that process this module points the stdout file descriptor at the
null device; the worker talks to Spark over a socket and reports errors there and on stderr, so
nothing else is lost. Every other process is left as it is.

Then the ``sitecustomize`` module this one hides (the next one on ``sys.path``), if any, runs
as it would have. :func:`spark_stream_sched.spark.embedded.quiet_python_workers` puts this
directory on the workers' PYTHONPATH.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

#: The module pyspark runs as the driver-side worker of transformWithStateInPandas.
DRIVER_WORKER = "pyspark.sql.streaming.transform_with_state_driver_worker"


def silence_driver_worker(argv: list[str]) -> bool:
    """Send this process's stdout to the null device if ``argv`` runs :data:`DRIVER_WORKER`."""
    if DRIVER_WORKER not in argv:
        return False
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    return True


def run_hidden_sitecustomize() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` after this file's directory, if any."""
    here = os.path.dirname(os.path.realpath(__file__))
    path = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


silence_driver_worker(sys.orig_argv)
run_hidden_sitecustomize()
