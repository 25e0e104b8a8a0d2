"""The query: its definition (:class:`QuerySpec`) and the logic it builds.

* :mod:`.spec`     -- :class:`QuerySpec`, the frozen, validated definition; fingerprint; build
* :mod:`.names`    -- option-name normaliser with suggestions, list splitters (every surface)
* :mod:`.ordered`  -- :class:`OrderedAggregation`: S-Merge -> [filter] -> windows (seed 004 §3)
* :mod:`.batch`    -- :class:`GroupedBatch`: one micro-batch over partition groups (seed 003)
* :mod:`.recorded` -- the definition recorded in a state location; refusing a changed one
"""

from __future__ import annotations

from spark_stream_sched.runtime.query.ordered import OrderedAggregation, aggregate_all
from spark_stream_sched.runtime.query.spec import QuerySpec, spec_from_options

__all__ = ["OrderedAggregation", "QuerySpec", "aggregate_all", "spec_from_options"]
