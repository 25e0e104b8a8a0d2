"""The engine's micro-batch steps, shared by every door (no pyspark).

* :mod:`.batch`      -- :class:`~.batch.GroupedBatch`: one batch over a set of partition groups
                        (the source's tasks, the batch read, the sink's tasks and its commit's
                        catch-up, the ``ordered()`` processor)
* :mod:`.order`      -- the order of a query's results across groups
* :mod:`.sink_rows`  -- rows of an unordered micro-batch (the sink's input) made runtime rows
* :mod:`.sink_batch` -- the sink's steps: a write task's groups, the commit's catch-up
"""
