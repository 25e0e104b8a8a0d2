"""The one state layer: every durable byte the project writes goes through here (no pyspark).

============================  =================================================================
``store.py``                  the state store interface: :class:`~.store.GroupState`, versions
                              of partition-group state (load a version, read / put / delete a
                              group, commit, prune), the one encoding of a group's state
``files.py``                  the file backend both the source and the sink write: group files
                              and per-writer manifests per version, the worker cache, pruning
``memory.py``                 the memory backend (batch reads)
``group_cache.py``            committed group state cached in a Python worker within a budget
``atomic.py``                 atomic write (temp + fsync + rename + directory fsync), exclusive
                              create, durable append, reads that name the missing file
``lock.py``                   :class:`~.lock.LocationLock`, one running query per state location
``sweep.py``                  removes the temporary files of interrupted writes, under the lock
``snapshot.py``               checksummed, versioned snapshots of runtime state (never pickle)
``records.py``                checksummed JSON records (manifests, markers, owner records)
``definition.py``             the query definition recorded at first start (``_query.json``)
``commit_log.py``             the sink's commit markers
``owner.py``                  owner records: one query per state location, source and sink
``batch_metrics.py``          the source's per-batch metrics files (parts per task, merged)
============================  =================================================================

The third backend, Spark's own state store, is the ``ordered()`` transformation's
(:class:`~spark_stream_sched.spark.transform_processor.ValueStateStore`). Every layout production
writes (and the input manifest, ``inputs``' append-only log) runs through one contract suite,
``tests/runtime/state/test_contract.py``: round trip, crash mid-write, truncated, corrupted and
missing files, and a full disk.
"""
