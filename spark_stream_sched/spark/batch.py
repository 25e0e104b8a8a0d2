"""``spark.read.format("ordered-agg")``: the same query over the files present now, in one pass.

A batch read returns the rows a ``Trigger.AvailableNow`` stream with ``endOfInput=availableNow``
returns over the same files (Spark orders neither across partitions): every file present when
the read is planned is consumed, and every input counts as finished at the end, so the ready
bound is +infinity and every window closes.

* driver, ``partitions()``: list each input (the one listing rule, ``inputs/listing.py``) and
  walk a cursor from the initial offset over all its rows, finished at the end
  (:func:`~spark_stream_sched.inputs.advance`, which also refuses out-of-order rows under
  ``outOfOrder=fail`` before any task starts); one partition per range of partition groups,
  carrying the files and the two offsets — the stream's :class:`GroupRangePartition`;
* executor, ``read(partition)``: the rows between the offsets through the runtime's one
  micro-batch entry, :class:`~spark_stream_sched.runtime.engine.batch.GroupedBatch`, with the
  state held in memory: the pass starts from empty state and its final state is dropped.

So a batch read needs no ``stateLocation``, writes nothing and takes no lock: it neither reads
nor changes the state of a stream that uses the same options, and an option ``stateLocation``
given anyway is ignored. Options that only steer a stream are ignored too:
``maxRecordsPerTrigger``, ``endOfInput``, ``idleTimeout``, ``lateFiles`` (no manifest: the
files are those listed now). Each task holds every input row once while it runs (it keeps only
its groups' rows for the windows); for inputs larger than a task's memory, run a stream with
``Trigger.AvailableNow`` and ``maxRecordsPerTrigger`` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark_stream_sched import inputs
from spark_stream_sched.inputs import Cursor
from spark_stream_sched.inputs.offsets import Offset, parse_offset
from spark_stream_sched.inputs.plan import OUTPUT_BATCH_ROWS, SourcePlan, rows_between
from spark_stream_sched.runtime.distribution.groups import group_range_for_task
from spark_stream_sched.runtime.state.memory import MemoryStateStore
from spark_stream_sched.runtime.state.store import BatchStore
from spark_stream_sched.spark.compat import arrow_schema
from spark_stream_sched.spark.source_plan import GroupRangePartition, to_spark
from spark_stream_sched.spark.worker_errors import reported

log = logging.getLogger(__name__)


class OrderedAggBatchReader(DataSourceReader):
    """Plans and reads one pass over the files present now (see the module docstring).

    Notes
    -----
    ``partitions()`` is called on the driver, once, when Spark plans the read; ``read()`` runs
    on executors on a pickled copy of this object and is stateless.
    """

    def __init__(self, plan: SourcePlan, schema: StructType) -> None:
        self._plan = plan
        self._schema = schema

    def end_offset(self, files: Sequence[list[str]]) -> Offset:
        """Each input's cursor after all of its rows in ``files``, finished."""
        c = self._plan.config
        cursors = []
        for stream, names in zip(self._plan.streams, files, strict=True):
            if not names:
                log.warning("input %d (%s) holds no files: the batch read counts it as "
                            "finished and empty; check option inputs if it should hold data",
                            stream.input_id, stream.path)
            rows = inputs.available_rows(names, Cursor(), c.format, None, stream)
            cursors.append(inputs.advance(stream, names, Cursor(), rows, c.timestamp_column,
                                          c.out_of_order, finish_when_exhausted=True))
        return Offset(tuple(cursors))

    @reported
    def partitions(self) -> Sequence[InputPartition]:
        """One partition per range of partition groups, over every row of every input."""
        c = self._plan.config
        files = [inputs.list_finished_files(path, "a batch read reads it once")
                 for path in c.inputs]
        start, end = Offset.initial(c.n_inputs), self.end_offset(files)
        n_tasks = min(c.num_partitions, c.partition_groups)
        return [GroupRangePartition(i, tuple(group_range_for_task(i, n_tasks, c.partition_groups)),
                                    start.to_json(), end.to_json(),
                                    tuple(tuple(f) for f in files))
                for i in range(n_tasks)]

    @reported
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The closed windows of the partition's groups, in output order."""
        assert isinstance(partition, GroupRangePartition)
        n = self._plan.config.n_inputs
        start, end = parse_offset(partition.start, n), parse_offset(partition.end, n)
        rows = rows_between(self._plan, partition.files, start, end)
        store = BatchStore(MemoryStateStore(), None, "end", f"t{partition.index:04d}")
        result = self._plan.batch(partition.groups).run(
            rows, store, start.ready_bound(), end.ready_bound())
        if result.output.num_rows:
            spark_rows = to_spark(result.output, arrow_schema(self._schema),
                                  self._plan.ts_is_timestamp)
            yield from spark_rows.to_batches(max_chunksize=OUTPUT_BATCH_ROWS)
