"""The query: its definition (:class:`QuerySpec`) and the logic it builds.

* :mod:`.spec`     -- :class:`QuerySpec`, the frozen, validated definition; fingerprint; build
* :mod:`.ordered`  -- :class:`OrderedAggregation`: S-Merge -> [filter] -> windows (Gulisano et
                      al., *Efficient data streaming multiway aggregation*, §3)
* :mod:`.recorded` -- the definition recorded in a state location; refusing a changed one

A micro-batch over partition groups runs in :mod:`spark_stream_sched.runtime.engine`; option
names and suggestions are :mod:`spark_stream_sched.runtime.names`.
"""

from __future__ import annotations

from spark_stream_sched.runtime.query.ordered import OrderedAggregation, aggregate_all
from spark_stream_sched.runtime.query.spec import QuerySpec, spec_from_options

__all__ = ["OrderedAggregation", "QuerySpec", "aggregate_all", "spec_from_options"]
