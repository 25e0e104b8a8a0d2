"""The one state layer: every durable byte the project writes goes through here (no pyspark).

============================  =================================================================
``atomic.py``                 atomic write (temp + fsync + rename + directory fsync), exclusive
                              create, durable append, reads that name the missing file
``lock.py``                   :class:`~.lock.LocationLock`, one running query per state location
                              (held for the query's life by the source, per commit by the sink)
``snapshot.py``               checksummed, versioned snapshots of runtime state (never pickle)
``versions.py``               the source's versioned partition-group state and ``_query.json``
``manifests.py``              per-version manifests: where each group's current file is
                              (incremental writes), and what pruning must keep
``group_store.py``            one task's load/commit of group state: incremental files,
                              manifests, the worker cache
``group_cache.py``            committed group state cached in a Python worker within a budget
``assignments.py``            recorded group -> task assignments of distributed adaptation
``commit_log.py``             the sink's commit markers, state files and owner record
``batch_metrics.py``          the source's per-batch metrics files (parts per task, merged)
============================  =================================================================

Every user of this layer (and the input manifest, ``inputs``' append-only log) runs through one
contract suite, ``tests/runtime/state/test_contract.py``: round trip, crash mid-write, truncated,
corrupted and missing files, and a full disk.
"""
