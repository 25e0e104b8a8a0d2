"""Keyed (partitioned stateful) operators and the pipelines that chain them.

Prasaad, Ramalingam & Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*
(§2: partitioned stateful operators see each key's tuples in the total order).
"""

from spark_stream_sched.runtime.keyed.base import KeyedOperator, build_operator, register
from spark_stream_sched.runtime.keyed.stage import StageSpec, operator_names, parse_stage

__all__ = ["KeyedOperator", "StageSpec", "build_operator", "operator_names", "parse_stage",
           "register"]
