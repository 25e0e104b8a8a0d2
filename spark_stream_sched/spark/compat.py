"""What the installed pyspark offers the adapter, found by feature, never by version string.

The plugin runs on every pyspark 4.x line (4.0 to 4.3). The Python data source API grew over
those lines, and this module is the one place that knows the differences; every other module
of the adapter imports the names below instead of importing them from pyspark:

* **Admission control for Python streaming sources** (``latestOffset(start, limit)``,
  ``getDefaultReadLimit``, the built-in ``ReadLimit`` classes, ``SupportsTriggerAvailableNow``)
  lives in ``pyspark.sql.streaming.datasource``, which exists from 4.2. Before that Spark calls
  ``latestOffset()`` without arguments and runs ``Trigger.AvailableNow`` through its own wrapper
  (one micro-batch up to the offset the source reports first). :data:`ADMISSION_CONTROL` says
  which; without it the same names are stand-ins of the same shape, so the reader's code and
  ``isinstance`` checks read the same on every line (docs/deploy.md, "Supported versions").
* **Arrow batches into a streaming writer**: ``DataSourceStreamArrowWriter`` exists from 4.1.
  pyspark 4.0's write worker hands Arrow batches, not rows, to any writer that is an instance of
  the batch ``DataSourceArrowWriter``, the streaming writer included; :data:`ArrowStreamWriter`
  is the base class that gets Arrow batches on the installed line.
* **Spark to Arrow schemas**: ``to_arrow_schema(schema, timezone=...)`` from 4.2,
  ``timestamp_utc=True`` before; :func:`arrow_schema` gives timestamps in UTC on both.

Importing this module never fails on a supported pyspark: pyspark's lookup of installed data
sources imports ``pyspark_ordered_agg`` (and so the adapter) on every worker, and one failing
import there hides every auto-registered Python data source, not only this one.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamWriter

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["ADMISSION_CONTROL", "ArrowStreamWriter", "ReadAllAvailable", "ReadLimit",
           "ReadMaxRows", "SupportsTriggerAvailableNow", "arrow_schema", "pyspark_version"]

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )

    #: Spark passes the source its start offset and a read limit (pyspark 4.2 and later).
    ADMISSION_CONTROL = True
except ImportError:  # pyspark 4.0 and 4.1: stand-ins of the same shape
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """How much a source may admit in one micro-batch (stand-in: never passed by Spark)."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """Admit every row available (stand-in)."""

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        """Admit at most ``max_rows`` rows (stand-in)."""

        max_rows: int

    class SupportsTriggerAvailableNow(ABC):  # type: ignore[no-redef]
        """A source that freezes its target offset when ``Trigger.AvailableNow`` starts.

        Stand-in: Spark before 4.2 never calls :meth:`prepareForTriggerAvailableNow` on a
        Python source; it wraps the source and runs the query as one micro-batch instead.
        """

        @abstractmethod
        def prepareForTriggerAvailableNow(self) -> None:
            """Record the offset of the data present now."""


def _arrow_stream_writer() -> type:
    """The base class whose ``write()`` pyspark feeds with Arrow record batches."""
    try:
        from pyspark.sql.datasource import DataSourceStreamArrowWriter
    except ImportError:  # pyspark 4.0: its write worker checks for the batch Arrow writer
        from pyspark.sql.datasource import DataSourceArrowWriter

        class Arrow40StreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[misc]
            """A streaming writer pyspark 4.0 hands Arrow batches (see the module doc)."""

        return Arrow40StreamWriter
    return DataSourceStreamArrowWriter


#: Base class of a streaming writer that receives ``pyarrow.RecordBatch`` objects.
ArrowStreamWriter: Any = _arrow_stream_writer()


def arrow_schema(schema: StructType) -> pa.Schema:
    """Spark's schema as Arrow's, timestamps as microseconds in UTC (every pyspark line)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        converted: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    else:  # pyspark 4.0 and 4.1: timestamp_utc (default True) gives UTC timestamps
        converted = to_arrow_schema(schema, timestamp_utc=True)  # type: ignore[call-arg]
    return converted


def pyspark_version() -> str:
    """The installed pyspark's version (for messages only; features are detected above)."""
    import pyspark

    return str(pyspark.__version__)
