"""A join that spills, followed by row stages and a window, equals the same query without a budget.

The join's reorder buffer (:mod:`~spark_stream_sched.runtime.keyed.join_hold`) keeps its output in
the total order while clean-up recovers what pushed state missed, and it passes on the ready
bound ``min(R, H)``. So a pipeline ``join(budget=0) -> running -> window`` must give, update for
update in total, exactly what the same pipeline gives when nothing spills (itself checked against
the oracles in ``test_pipelines.py``): the same windows, the same ``first()``, the same running
counts. Without the lowered bound a window closes before the missing results arrive; without
the buffer ``first()`` and the running count see clean-up results out of order -- both fail here.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime.keyed.join import Join
from spark_stream_sched.runtime.keyed.pipeline import Pipeline
from spark_stream_sched.runtime.keyed.stage import parse_stage
from spark_stream_sched.runtime.window.spec import WindowSpec
from tests.runtime.keyed.test_join import SCHEMA, chunking, exact, join_rows

AGGREGATES = ("count(*) as n", "first(v_0) as fv", "last(rn) as lr", "max(gap) as mg")


def pipeline(n: int, within: int, budget: str | None, window: WindowSpec | None) -> Pipeline:
    """``join(n, within, budget) -> running(count) -> delta(ts)`` on ``k``, then ``window``."""
    spill = f", budget={budget}" if budget is not None else ""
    stages = [parse_stage(f"join({n}, within={within} ms{spill})"),
              parse_stage("running(count(*) as rn)"), parse_stage("delta(ts) as gap")]
    return Pipeline(stages, window, ["k"], AGGREGATES if window else (), "ts", SCHEMA)


def run(make: Any, rows: pa.Table, plan: Any) -> tuple[list[str], int]:
    """Every output row of the pipeline over ``rows`` cut by ``plan``; clean-ups that ran."""
    cuts, bounds, restore_at = plan
    query, outputs, edges = make(), [], [0, *cuts, rows.num_rows]
    for c, (start, end) in enumerate(zip(edges, edges[1:], strict=False)):
        if c == restore_at:
            query = Pipeline.restore(query.snapshot(), query.stages)
        outputs.append(query.update(rows.slice(start, end - start), bounds[c]))
    outputs.append(query.finish())
    cleanups = sum(op.stats["cleanups"] for op in query.operators if isinstance(op, Join))
    return exact(pa.concat_tables(outputs).to_pylist()), cleanups


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(2, 3), st.sampled_from([2, 5, 20]), st.sampled_from(["0", "0", "1k"]),
       st.sampled_from([WindowSpec(10, 10), WindowSpec(8, 4), None]), st.data())
def test_a_spilling_join_then_stages_and_a_window_equals_no_spilling(
        n: int, within: int, budget: str, window: WindowSpec | None, data: st.DataObject) -> None:
    rows = data.draw(join_rows(n, 48))
    plan = data.draw(chunking(rows))
    assume(len(plan[0]) >= 2)
    spilled, cleanups = run(lambda: pipeline(n, within, budget, window), rows, plan)
    plain, _ = run(lambda: pipeline(n, within, None, window), rows, plan)
    event(f"clean-ups ran: {cleanups > 0}, rows: {len(plain) > 0}")
    assert spilled == plain
