"""Whether a Python interpreter can run the plugin's side of Spark's Python workers.

Spark's Python workers run the interpreter named by ``spark.pyspark.python`` or
``PYSPARK_PYTHON``, else ``python3`` from ``PATH``. When that interpreter lacks this package
(or pyarrow, which the package needs), pyspark's lookup of installed data sources finds no
``ordered-agg`` and Spark's first line names only the missing format. :func:`lacking` runs the
interpreter once and says what it cannot import, so the driver can name the cause and the fix
before Spark does (:func:`spark_stream_sched.spark.embedded.check_workers_python`).
"""

from __future__ import annotations

import functools
import shutil
import subprocess

#: What the workers import: the package, its auto-registration module, and pyarrow.
NEEDED = ("pyarrow", "spark_stream_sched", "pyspark_ordered_agg")
_PROBE = ("import importlib, sys\n"
          "for name in sys.argv[1:]:\n"
          "    try:\n"
          "        importlib.import_module(name)\n"
          "    except Exception as exc:\n"
          "        print(f'{name}: {type(exc).__name__}: {exc}')\n"
          "        break\n")


@functools.lru_cache(maxsize=8)
def lacking(executable: str) -> str | None:
    """What ``executable`` cannot import of :data:`NEEDED` (None: it can run the workers).

    A name without a path is looked up on ``PATH`` (as Spark does); one that is missing or does
    not start is reported as such. Runs the interpreter once per name and process.
    """
    found = shutil.which(executable) or executable
    try:
        done = subprocess.run([found, "-c", _PROBE, *NEEDED], capture_output=True, text=True,
                              timeout=120, check=False)
    except OSError as exc:
        return f"it does not start ({exc.strerror or exc})"
    except subprocess.TimeoutExpired:
        return None  # a slow interpreter is not a missing package; Spark will tell
    if done.returncode != 0:
        return f"it exits with status {done.returncode}: {done.stderr.strip()[-300:]}"
    return done.stdout.strip() or None
