"""Schema resolution: the one row schema every file of every input is read with.

The schema is the declared one (the source's option ``schema``) when given; otherwise it is
inferred from the **first file that holds a row**, taking the inputs in order and each input's
files in stream order (empty files offer no schema: an empty JSON-lines file has no columns, a
header-only CSV file no types). Every file, later ones included, is then parsed as that schema,
so the CLI, the jobs and the Spark source read the same values from the same files. A stream
records the schema it resolved at its first start in its state location and reads with that
record at every later start (:func:`~spark_stream_sched.inputs.plan.input_schema`).

Pure Python + PyArrow (no pyspark).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.files import count_rows, infer_schema
from spark_stream_sched.inputs.listing import list_files

#: What to do when no file holds a row, as the Spark source says it.
SOURCE_HINT = "set option schema, e.g. 'ts bigint, key string, value double'"


def first_file_with_rows(paths: Sequence[str], fmt: str) -> str | None:
    """The first file holding a row, over ``paths`` in order (None when there is none)."""
    for path in paths:
        for file in list_files(path):
            if count_rows(file, fmt) > 0:
                return file
    return None


def resolve_schema(paths: Sequence[str], fmt: str, declared: Any = None,
                   hint: str = SOURCE_HINT) -> Any:
    """The input schema: ``declared``, else inferred from the first file holding a row.

    Raises
    ------
    ConfigError
        No schema is declared and no file under ``paths`` holds a row yet; ``hint`` says what
        to do.
    """
    if declared is not None:
        return declared
    first = first_file_with_rows(paths, fmt)
    if first is None:
        raise ConfigError(f"no schema is declared and no input file under {list(paths)} holds "
                          f"a row to infer it from; {hint}")
    return infer_schema(first, fmt)
