"""An embedded local Spark: environment set before the JVM starts, quiet settings; ``configure``.

``PYSPARK_PYTHON`` must name this interpreter (otherwise Python workers run ``python3`` from
``PATH``, which may lack this package) and ``SPARK_LOCAL_IP`` must be loopback; both are read
when the JVM and the SparkContext start, so :func:`prepare_environment` runs first. When the
repository's ``conf/`` directory is present (editable install) it becomes ``SPARK_CONF_DIR``,
which brings ``spark-defaults.conf`` and the quiet ``log4j2.properties``. Sessions started here
keep pyspark's ``transformWithStateInPandas`` worker from printing to the console
(:func:`quiet_python_workers`). Every setting :func:`session` makes is listed in docs/deploy.md,
"What session() sets".

:func:`configure` is the hook for a user's own session: on a ``SparkSession.Builder`` it sets
only what the plugin needs, on a running session it sets what ``ordered()`` needs and checks
that Spark's Python workers can import the package (:func:`check_workers_python`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Applied to sessions this module creates (``conf/spark-defaults.conf`` holds the same).
QUIET_SETTINGS: tuple[tuple[str, str], ...] = (
    ("spark.ui.enabled", "false"),
    ("spark.ui.showConsoleProgress", "false"),
    ("spark.driver.bindAddress", "127.0.0.1"),
    ("spark.sql.shuffle.partitions", "2"),
    ("spark.sql.session.timeZone", "UTC"),
)

#: Holds only ``sitecustomize.py``, which silences the stdout of the driver-side Python worker
#: of ``transformWithStateInPandas`` (see :func:`quiet_python_workers`).
WORKER_SITE = Path(__file__).resolve().parent / "worker_site"


#: What ordered() needs: the state store transformWithStateInPandas requires.
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
ORDERED_SETTINGS: tuple[tuple[str, str], ...] = ((PROVIDER_CONF, ROCKSDB_PROVIDER),)
PYTHON_CONFS = ("spark.pyspark.python", "spark.pyspark.driver.python")


def repo_conf_dir() -> Path | None:
    """Return the repository's ``conf/`` directory when running from a source checkout."""
    candidate = Path(__file__).resolve().parents[2] / "conf"
    return candidate if (candidate / "spark-defaults.conf").is_file() else None


def prepare_environment() -> None:
    """Set ``PYSPARK_PYTHON``, ``SPARK_LOCAL_IP`` and ``SPARK_CONF_DIR`` unless already set.

    Notes
    -----
    Must run before the JVM starts; has no effect on a running SparkContext.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = repo_conf_dir()
    if conf is not None:
        os.environ.setdefault("SPARK_CONF_DIR", str(conf))


def build_session(master: str | None, app_name: str,
                  settings: tuple[tuple[str, str], ...] = ()) -> Any:
    """Start (or get) a SparkSession whose Python workers run this interpreter.

    Sets the environment first (:func:`prepare_environment`); with a ``master`` (a session
    started here, not by ``spark-submit``, whose own ``--conf`` settings are kept) also
    ``spark.pyspark.python`` and ``spark.pyspark.driver.python`` to ``sys.executable``. Then the
    quiet settings and ``settings``. The ``ordered-agg`` format is registered explicitly only
    when the auto-registered module ``pyspark_ordered_agg`` is not installed (registering it
    twice makes Spark warn that a static registration was replaced).
    """
    from pyspark.sql import SparkSession

    prepare_environment()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    python = (("spark.pyspark.python", sys.executable),
              ("spark.pyspark.driver.python", sys.executable)) if master else ()
    for key, value in (*python, *QUIET_SETTINGS, *settings):
        builder = builder.config(key, value)
    logger.info("starting Spark (master %s)", master or "from spark-submit")
    session = builder.getOrCreate()
    quiet_python_workers(session)
    from spark_stream_sched.spark import register

    register(session)
    return session


def configure(target: Any) -> Any:
    """Set what the plugin needs on a ``SparkSession.Builder`` or a running ``SparkSession``.

    On a builder (before the session starts): the Python workers run this interpreter --
    ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` in this process's environment (the JVM
    reads them when it starts; its driver-side lookup of data sources uses no other setting)
    and ``spark.pyspark.python`` / ``spark.pyspark.driver.python`` for the executors, all
    ``sys.executable`` -- unless ``PYSPARK_PYTHON`` is set, the builder names a Python
    already, or ``spark-submit`` started this process (its settings are kept); and what
    ``ordered()`` needs: the RocksDB state store. Nothing else changes. Returns the builder, so
    ``configure(SparkSession.builder.appName("job")).getOrCreate()`` reads as one line.

    On a session: the ``ordered()`` setting (it applies to queries started afterwards),
    then :func:`check_workers_python`. Returns the session.

    Notes
    -----
    Called on the driver.
    """
    from pyspark.sql import SparkSession

    if isinstance(target, SparkSession.Builder):
        given = getattr(target, "_options", {})  # what the builder holds (pyspark keeps it)
        launched_by_spark = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit's driver
        if not (os.environ.get("PYSPARK_PYTHON") or launched_by_spark
                or any(k in given for k in PYTHON_CONFS)):
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            for key in PYTHON_CONFS:
                target = target.config(key, sys.executable)
        for key, value in ORDERED_SETTINGS:
            target = target.config(key, value)
        return target
    for key, value in ORDERED_SETTINGS:
        target.conf.set(key, value)
    check_workers_python(target)
    return target


def check_workers_python(session: Any) -> None:
    """Refuse, naming the cause and the fix, a local session whose Python workers lack the package.

    Spark would otherwise fail later with ``DATA_SOURCE_NOT_FOUND`` (the lookup worker finds no
    ``ordered-agg``) or ``No module named ...`` in a task. Only local masters are checked: a
    cluster's workers run on other machines (docs/deploy.md). The interpreter runs once per
    driver process (:func:`~spark_stream_sched.interpreters.lacking`).

    Raises
    ------
    ConfigError
        Naming the workers' interpreter, what it cannot import, and the settings that fix it.
    """
    from spark_stream_sched.errors import ConfigError
    from spark_stream_sched.interpreters import lacking

    context = getattr(session, "sparkContext", None)  # a Spark Connect session has none
    if context is None or not str(context.master).startswith("local"):
        return
    executable = str(getattr(context, "pythonExec", None) or "python3")
    missing = lacking(executable)
    if missing is None:
        return
    named = (f"{executable} (spark.pyspark.python or PYSPARK_PYTHON)" if executable != "python3"
             else "python3 from PATH (spark.pyspark.python and PYSPARK_PYTHON are unset)")
    raise ConfigError(
        f"Spark's Python workers run {named}, which cannot run the ordered-agg "
        f"plugin ({missing}); start the session with spark.pyspark.python={sys.executable} "
        f"(PYSPARK_PYTHON, or spark_stream_sched.spark.configure(SparkSession.builder) does "
        f"it), or install spark_stream_sched for that interpreter (docs/deploy.md)")


def quiet_python_workers(session: Any) -> None:
    """Put :data:`WORKER_SITE` first on the PYTHONPATH of the session's Python workers.

    pyspark's driver-side ``transformWithStateInPandas`` worker (run by ``ordered()`` at each
    query start) prints five progress lines that Spark copies to the console past log4j; the
    ``sitecustomize`` module there silences that process's stdout and leaves every other
    worker alone.

    Notes
    -----
    Called on the driver. Each Python function carries the context's ``environment`` as it was
    when the function was defined, so this applies to queries defined afterwards. A
    ``PYTHONPATH`` already there (``spark.executorEnv.PYTHONPATH``) is kept after it; on a
    cluster whose workers lack the directory the entry does nothing. A Spark Connect session
    (no SparkContext here) is left alone: the server's settings apply.
    """
    context = getattr(session, "sparkContext", None)  # a Spark Connect session has none
    if context is None:
        return
    environment = context.environment
    entries = [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(WORKER_SITE) not in entries:
        environment["PYTHONPATH"] = os.pathsep.join([str(WORKER_SITE), *entries])


def get_spark(app_name: str = "spark-stream-sched", settings: tuple[tuple[str, str], ...] = (),
              master: str | None = None) -> Any:
    """Return the active SparkSession, or start one with the quiet settings and ``settings``.

    Parameters
    ----------
    app_name:
        Name of a new session.
    settings:
        Spark settings of a new session (a job's ``[spark]`` table).
    master:
        Master URL for a new session; ``None`` keeps what ``spark-submit`` configured.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    session = build_session(master, app_name, settings)
    session.sparkContext.setLogLevel("ERROR")
    return session
