"""``format("ordered-agg")``: the registered data source (schema, readers, the sink's writer).

The stream reader lives in :mod:`.source`, the batch reader in :mod:`.batch`, the sink in
:mod:`.sink`; each is imported when Spark asks for it.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from spark_stream_sched.errors import SparkStreamSchedError
from spark_stream_sched.inputs.plan import build_plan
from spark_stream_sched.runtime.query.recorded import check_recorded, record_spec
from spark_stream_sched.runtime.state.input_schema import record_input_schema
from spark_stream_sched.spark.shipped_files import reach_shipped_files
from spark_stream_sched.spark.source_plan import check_schema_matches
from spark_stream_sched.spark.worker_errors import RefusedStreamReader, plain_errors


class OrderedAggDataSource(DataSource):
    """``format("ordered-agg")``: deterministic merged, windowed aggregates of file streams.

    Notes
    -----
    ``schema()`` and ``streamReader()`` are called on the driver; they validate every option so
    a bad one fails when the query is defined or started.
    """

    @classmethod
    def name(cls) -> str:
        """Short name used in ``format(...)``."""
        return "ordered-agg"

    def schema(self) -> StructType:
        """Result schema: window bounds (type of the input event time), keys, aggregates.

        Also refuses, at ``load()``, a definition that differs from the one recorded under
        ``stateLocation`` (``runtime/query/recorded.py``).
        """
        with plain_errors():
            plan = build_plan(self.options, streaming=False)  # a batch read: no stateLocation
            if plan.config.state_location:
                check_recorded(plan.config.state_location, plan.config.spec)
            return from_arrow_schema(plan.output_arrow_schema())

    def reader(self, schema: StructType) -> DataSourceReader:
        """``spark.read.format("ordered-agg")``: the query over the files present now.

        Returns the batch reader of ``spark/batch.py`` (state in memory; ``stateLocation``
        is neither needed nor touched).
        """
        from spark_stream_sched.spark.batch import OrderedAggBatchReader

        with plain_errors():
            plan = build_plan(self.options, streaming=False)
            check_schema_matches(plan, schema)
            return OrderedAggBatchReader(plan, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Create the stream reader; records the query and the input schema at first start.

        Notes
        -----
        Called on the driver in the query's thread, after ``start()`` returned. Errors found
        here (a stream without ``stateLocation``, a ``.schema()`` that differs from the
        result's) are raised by the reader's first driver call instead, before any data moves:
        pyspark 4.3's source runner would report an exception raised here as an unrelated
        ``UnboundLocalError`` (:class:`~.worker_errors.RefusedStreamReader`). Modules shipped
        with ``--py-files`` or ``addPyFile`` are put on this worker's path first
        (:mod:`.shipped_files`), so a ``udf`` stage imports here as on the executors.
        """
        reach_shipped_files()
        try:
            plan = build_plan(self.options)
            check_schema_matches(plan, schema)
            record_spec(plan.config.state_location, plan.config.spec)
            record_input_schema(plan.config.state_location, plan.input_schema)
        except SparkStreamSchedError as exc:
            return RefusedStreamReader(exc)
        from spark_stream_sched.spark.source import OrderedAggStreamReader

        return OrderedAggStreamReader(plan, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("ordered-agg")``: the sink of ``spark/sink.py``.

        Defined here so that the one auto-registered ``ordered-agg`` format both reads and
        writes; the sink's options and contract are documented in that module.
        """
        from spark_stream_sched.spark.sink import make_stream_writer

        return make_stream_writer(self.options, schema)
