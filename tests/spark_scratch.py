"""Where the JVMs that tests start keep Spark's scratch files: under a test's own directory.

Spark deletes its scratch directories (``spark-*``, ``blockmgr-*``) and the native libraries
its JVMs unpack (RocksDB, Snappy, LZ4) only at a clean exit, so every JVM a fault test kills
left them in ``/tmp``, dozens per run; a Python worker that is killed leaves its join's spill
directory (``join-spill-*``) in its temporary directory. The tests point them into their run's
temporary directory instead, which pytest (or a cluster fixture) removes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

#: The variables :func:`scratch_env` sets.
NAMES = ("SPARK_LOCAL_DIRS", "SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "TMPDIR")


def scratch_env(local: Path, environ: Mapping[str, str], *, daemon: bool = False) -> dict[str, str]:
    """The variables that keep Spark's scratch files of a JVM started with ``environ`` in ``local``.

    ``SPARK_LOCAL_DIRS`` (block managers, files, Python workers) is ``local``; ``java.io.tmpdir``
    is ``local/tmp`` (created here), set through ``SPARK_SUBMIT_OPTS`` for ``spark-submit`` and
    the sessions tests start; ``TMPDIR``, the temporary directory of every process started
    with these variables (the Python workers' spill directories), is ``local/tmp`` too.
    ``daemon``: a standalone master or worker, whose executors are JVMs it starts itself with
    its environment and their own options, which ``SPARK_SUBMIT_OPTS`` does not reach; for them
    it goes through ``JAVA_TOOL_OPTIONS``, which every JVM reads. An option already in
    ``environ`` is kept before ours.
    """
    tmp = temp_dir(local)
    tmp.mkdir(parents=True, exist_ok=True)
    option = f"-Djava.io.tmpdir={tmp}"

    def extended(name: str) -> str:
        return " ".join(filter(None, [environ.get(name), option]))

    env = {"SPARK_LOCAL_DIRS": str(local), "SPARK_SUBMIT_OPTS": extended("SPARK_SUBMIT_OPTS"),
           "TMPDIR": str(tmp)}
    if daemon:
        env["JAVA_TOOL_OPTIONS"] = extended("JAVA_TOOL_OPTIONS")
    return env


def temp_dir(local: Path) -> Path:
    """The temporary directory (``TMPDIR``, ``java.io.tmpdir``) :func:`scratch_env` sets."""
    return local / "tmp"
