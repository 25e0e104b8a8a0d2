"""FIFO vs Chain on the select/join plan of Figure 1 / Table 1.

Jiang & Chakravarthy (2003), §2.2, Table 2.


The plan (``conf/sim/example_2_2_plan.json``): select 1 on stream 1 and select 2 on stream 2
(selectivity 0.2, capacity 1 tuple per time unit) feed join 3 (semi-join selectivity 0.8,
capacity 0.2). Inputs (``conf/sim/example_2_2_arrivals.json``): stream 1 at times 1, 3, 10;
stream 2 at times 2, 3. The paper's numbers are written out below and compared exactly
(``exact=True`` computes with fractions, so 0.2 is 1/5 and 0.16 is 4/25).

Model assumptions re-read from the paper and reproduced: a tuple arriving at time ``t`` is
still queued at the end of time unit ``t`` (row 1: queue 1.0, nothing processed), one time unit
of processing per row, the root consumes join outputs at once (§2.1 assumption 1), and latency
is output time minus arrival time.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from spark_stream_sched.runtime.plan import load_plan
from spark_stream_sched.runtime.scheduler import Simulator, get_strategy, load_arrivals

CONF = Path(__file__).resolve().parents[2] / "conf" / "sim"

# Table 2 of Jiang & Chakravarthy (2003), per time 1..10: queue size, tuple latency (None for "-"),
# throughput.
TABLE_2 = {
    "fifo": (
        ["1.0", "1.2", "3.0", "2.2", "2.0", "1.2", "1.0", "0.2", "0", "1.0"],
        [None, None, 2, None, 3, None, 4, None, 6, None],
        ["0", "0.0", "0.16", "0", "0.16", "0", "0.16", "0", "0.16", "0"],
    ),
    "chain": (
        ["1.0", "1.2", "2.4", "1.6", "0.8", "0.6", "0.4", "0.2", "0", "1.0"],
        [None, None, None, None, None, 5, 5, 5, 6, None],
        ["0", "0", "0", "0", "0", "0.16", "0.16", "0.16", "0.16", "0"],
    ),
}
INPUTS = [(1, 0), (0, 1), (1, 1), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (1, 0)]


def run_example(strategy: str, exact: bool):
    plan = load_plan(CONF / "example_2_2_plan.json")
    arrivals = load_arrivals(CONF / "example_2_2_arrivals.json")
    return Simulator(plan, get_strategy(strategy), arrivals, exact=exact).run(10).records


def test_example_inputs_match_table_2():
    arrivals = load_arrivals(CONF / "example_2_2_arrivals.json")
    got = [(arrivals["s1"].get(t, 0), arrivals["s2"].get(t, 0)) for t in range(1, 11)]
    assert got == INPUTS


@pytest.mark.parametrize("strategy", ["fifo", "chain"])
def test_table_2_exact(strategy):
    queue, latency, throughput = TABLE_2[strategy]
    records = run_example(strategy, exact=True)
    assert [r.time for r in records] == list(range(1, 11))
    assert [r.queue_size for r in records] == [Fraction(q) for q in queue]
    assert [r.latency for r in records] == latency
    assert [r.output for r in records] == [Fraction(t) for t in throughput]


@pytest.mark.parametrize("strategy", ["fifo", "chain"])
def test_table_2_in_floating_point(strategy):
    queue, latency, throughput = TABLE_2[strategy]
    records = run_example(strategy, exact=False)
    assert [r.queue_size for r in records] == pytest.approx([float(q) for q in queue], abs=1e-12)
    assert [r.output for r in records] == pytest.approx([float(t) for t in throughput], abs=1e-12)
    got = [None if r.latency is None else pytest.approx(r.latency, abs=1e-12) for r in records]
    assert got == latency


def test_chain_keeps_less_queue_but_fifo_outputs_earlier():
    """The paper's reading of Table 2: Chain wins on queue size, FIFO on latency/throughput."""
    fifo, chain = run_example("fifo", True), run_example("chain", True)
    assert all(c.queue_size <= f.queue_size for f, c in zip(fifo, chain, strict=True))
    first_fifo = next(r.time for r in fifo if r.output > 0)
    first_chain = next(r.time for r in chain if r.output > 0)
    assert first_fifo < first_chain
    assert sum(r.output for r in fifo) == sum(r.output for r in chain) == Fraction(16, 25)
