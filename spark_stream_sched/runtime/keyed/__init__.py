"""Keyed (partitioned stateful) operators of seed 002 and the pipelines that chain them."""

from spark_stream_sched.runtime.keyed.base import (
    KeyedOperator,
    build_operator,
    operator_names,
    register,
)
from spark_stream_sched.runtime.keyed.stage import StageSpec, parse_stage

__all__ = ["KeyedOperator", "StageSpec", "build_operator", "operator_names", "parse_stage",
           "register"]
