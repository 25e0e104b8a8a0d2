"""Capacities of operators, operator paths and segments.

See Jiang & Chakravarthy (2003), eqs 2.1-2.3, 3.1-3.2.

All functions are pure: they read the current statistics and return floats, so a strategy can
recompute them whenever :attr:`StatsTable.version` changes. Sizes are in memory units and
capacities in tuples per time unit.

Conventions (documented deviations and readings of the paper):

* The output of a root operator is consumed at once by the application (§2.1 assumption 1), so
  its output tuple size counts as 0 in eqs 2.1 and 3.2 (§3.3: "for the last segment, the size of
  the output tuple is zero").
* An operator whose output feeds several operators (shared sub-plans) keeps one copy per
  consumer queue, so the memory it adds is ``T_i * sigma_i * n_consumers``.
* Eq 3.1 prints the last term as ``prod_{j=1..k} sigma_j / C_k``; we read it as
  ``prod_{j=1..k-1}``, the same service time as eq 2.2 (the text defines the general item as
  the service time at the (h+1)-th operator for the output of the h-th).
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.stats import StatsTable


def operator_capacity(stats: StatsTable, op_id: str) -> float:
    """Operator processing capacity ``C^P_O``: tuples processed per time unit (§2.1)."""
    return stats[op_id].capacity


def output_memory_per_tuple(plan: QueryPlan, stats: StatsTable, op_id: str) -> float:
    """Memory an input tuple of ``op_id`` turns into at its output: ``T_i * sigma_i * copies``."""
    s = stats[op_id]
    return s.output_tuple_size * s.selectivity * len(plan.consumers(op_id))


def operator_memory_release_capacity(plan: QueryPlan, stats: StatsTable, op_id: str) -> float:
    """Operator memory release capacity ``C^M_O = C^P_O (InputTupleSize - T_i sigma_i)`` (2.1)."""
    s = stats[op_id]
    return s.capacity * (s.input_tuple_size - output_memory_per_tuple(plan, stats, op_id))


def chain_service_time(stats: StatsTable, ops: Sequence[str]) -> float:
    """Time to serve one tuple entering ``ops[0]`` through the whole chain (denominator of 2.2)."""
    total = 0.0
    fraction = 1.0
    for op in ops:
        total += fraction * stats[op].cost
        fraction *= stats[op].selectivity
    return total


def chain_processing_capacity(stats: StatsTable, ops: Sequence[str]) -> float:
    """Return the processing capacity of a chain of operators, bottom-up (eqs 2.2 and 3.1)."""
    return 1.0 / chain_service_time(stats, ops)


def path_processing_capacity(stats: StatsTable, ops: Sequence[str]) -> float:
    """Operator path processing capacity ``C^P_P`` (eq 2.2); ``ops`` from leaf to root."""
    return chain_processing_capacity(stats, ops)


def path_memory_release_capacity(stats: StatsTable, ops: Sequence[str]) -> float:
    """Path memory release capacity ``C^M_P = C^P_P * InputTupleSize`` (eq 2.3)."""
    return path_processing_capacity(stats, ops) * stats[ops[0]].input_tuple_size


def chain_selectivity(stats: StatsTable, ops: Sequence[str]) -> float:
    """Product of the selectivities along ``ops``."""
    product = 1.0
    for op in ops:
        product *= stats[op].selectivity
    return product


def segment_memory_release_capacity(
    plan: QueryPlan, stats: StatsTable, ops: Sequence[str]
) -> float:
    """Segment memory release capacity ``C^M_S = C^P_S (InputTupleSize - S_o prod sigma)`` (3.2).

    ``S_o`` is the output tuple size of the segment's last operator times its number of
    consumer queues (0 when it is a root).
    """
    last = ops[-1]
    s_o = stats[last].output_tuple_size * len(plan.consumers(last))
    released = stats[ops[0]].input_tuple_size - s_o * chain_selectivity(stats, ops)
    return chain_processing_capacity(stats, ops) * released
