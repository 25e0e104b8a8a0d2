"""The order of a query's results across partition groups, the one definition every door uses.

Windows leave by ``(window_end, window_start, keys)``; sessions by ``(session_end,
session_start, keys)``; rows of a row operator in the total order ``(ts, input, seq)`` of the
tuples that produced them (:func:`~spark_stream_sched.runtime.keyed.pipeline.result_order`).
A micro-batch's results of several groups -- one task's, a sink commit's, or one group's in the
``ordered()`` transformation -- are put in that order here, and the internal ``__input`` /
``__seq`` columns are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from spark_stream_sched.runtime.keyed.pipeline import (
    result_order,
    sort_ascending,
    without_internal_columns,
)
from spark_stream_sched.runtime.query.spec import QuerySpec


def output_order(spec: QuerySpec) -> list[str]:
    """Columns whose ascending order is ``spec``'s result order."""
    return result_order(spec.operators, spec.window is not None, spec.key_columns,
                        spec.timestamp_column)


def in_output_order(spec: QuerySpec, parts: Sequence[pa.Table]) -> pa.Table:
    """``parts`` (results of any groups) as one table in ``spec``'s order, internal columns gone.

    Tables without rows are skipped; at least one table is needed (its schema is the result's
    when every part is empty).
    """
    full = [p for p in parts if p.num_rows] or list(parts[:1])
    out = pa.concat_tables(full, promote_options="permissive") if len(full) > 1 else full[0]
    return without_internal_columns(sort_ascending(out, output_order(spec)))
