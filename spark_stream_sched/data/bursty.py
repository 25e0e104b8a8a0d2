"""Bursty self-similar arrivals and random multi-query plans (Jiang & Chakravarthy 2003, §5.1).

Each input stream is the superposition of ``flows`` ON/OFF flows. A flow sends tuples only
during its ON periods, with exponential inter-arrival times; ON and OFF period lengths follow
Pareto distributions ``P(x) = a b^a x^-(a+1), x >= b`` with ``a = 1.4`` (ON) and ``a = 1.2``
(OFF). Heavy-tailed periods make the superposition self-similar (bursty at every time scale).

Counts per time unit are drawn exactly: a Poisson process of rate ``lam`` observed for ``d``
time units gives a Poisson(``lam * d``) count, and independent Poisson counts add up, so the
count of a stream in a time unit is Poisson(``lam`` times the ON time of all its flows in that
unit). Everything is a pure function of the arguments and ``seed``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan import OperatorDef, OperatorKind, QueryPlan

ON_SHAPE = 1.4
OFF_SHAPE = 1.2


def on_fraction(on_shape: float = ON_SHAPE, off_shape: float = OFF_SHAPE) -> float:
    """Return the long-run fraction of time a flow is ON (Pareto means ``a b / (a - 1)``)."""
    on = on_shape / (on_shape - 1)
    off = off_shape / (off_shape - 1)
    return on / (on + off)


def bursty_counts(
    mean_rates: Mapping[str, float],
    steps: int,
    *,
    seed: int,
    flows: int = 64,
    min_period: float = 1.0,
    on_shape: float = ON_SHAPE,
    off_shape: float = OFF_SHAPE,
) -> dict[str, np.ndarray]:
    """Draw tuples per time unit for each stream.

    Parameters
    ----------
    mean_rates
        Stream name -> long-run mean tuples per time unit. Over a finite horizon the observed
        mean is usually somewhat higher: OFF periods are so heavy-tailed (``a = 1.2``) that
        their mean is dominated by rare, very long periods.
    steps
        Number of time units (arrays have this length; index = time unit).
    seed
        Seed of :func:`numpy.random.default_rng`; streams use it in name order.
    flows
        ON/OFF flows per stream (the paper uses 64 or 128).
    min_period
        Pareto scale ``b``: the shortest ON or OFF period, in time units.

    Returns
    -------
    dict
        Stream name -> ``int64`` array of counts per time unit.
    """
    if steps < 0 or flows < 1 or min_period <= 0 or on_shape <= 1 or off_shape <= 1:
        raise ConfigError("need steps >= 0, flows >= 1, min_period > 0 and Pareto shapes > 1")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for stream in sorted(mean_rates):
        rate = float(mean_rates[stream])
        if rate < 0:
            raise ConfigError(f"mean rate of stream {stream!r} must be >= 0, got {rate}")
        lam = rate / (flows * on_fraction(on_shape, off_shape))
        on_time = np.zeros(steps)
        for _ in range(flows):
            on_time += _flow_on_time(rng, steps, min_period, on_shape, off_shape)
        out[stream] = rng.poisson(lam * on_time).astype(np.int64)
    return out


def _pareto(rng: np.random.Generator, shape: float, scale: float, n: int) -> np.ndarray:
    return scale * (1.0 + rng.pareto(shape, n))


def _flow_on_time(
    rng: np.random.Generator, steps: int, b: float, on_shape: float, off_shape: float
) -> np.ndarray:
    """ON time of one flow within each time unit ``[t, t + 1)``."""
    n = max(4, int(2 * steps / b) + 4)
    on = _pareto(rng, on_shape, b, n)
    off = _pareto(rng, off_shape, b, n)
    starts_on = rng.random() < on_fraction(on_shape, off_shape)
    cycle = np.empty(2 * n)
    cycle[0::2], cycle[1::2] = (on, off) if starts_on else (off, on)
    edges = np.concatenate(([0.0], np.cumsum(cycle))) - rng.random() * cycle[0]
    first_on = 0 if starts_on else 1
    s = np.clip(edges[first_on:-1:2], 0, steps)
    e = np.clip(edges[first_on + 1::2], 0, steps)
    k = min(len(s), len(e))
    return _interval_time(s[:k], e[:k], steps)


def _interval_time(s: np.ndarray, e: np.ndarray, steps: int) -> np.ndarray:
    """Total length of the intervals ``[s, e)`` falling into each unit ``[t, t + 1)``."""
    keep = e > s
    s, e = s[keep], e[keep]
    out = np.zeros(steps + 1)
    diff = np.zeros(steps + 2)
    i0 = np.floor(s).astype(np.int64)
    i1 = np.floor(e).astype(np.int64)
    same = i0 == i1
    np.add.at(out, i0[same], e[same] - s[same])
    a0, a1, sa, ea = i0[~same], i1[~same], s[~same], e[~same]
    np.add.at(out, a0, a0 + 1 - sa)
    np.add.at(out, a1, ea - a1)
    np.add.at(diff, a0 + 1, 1.0)
    np.add.at(diff, a1, -1.0)
    return (out + np.cumsum(diff)[: steps + 1])[:steps]


def as_arrivals(counts: Mapping[str, np.ndarray], start: int = 1) -> dict[str, dict[int, float]]:
    """Convert count arrays to the simulator's ``{stream: {time: count}}``; index 0 is ``start``."""
    return {
        s: {start + int(t): float(c[t]) for t in np.flatnonzero(c)} for s, c in counts.items()
    }


def random_plan(
    n_queries: int,
    streams: list[str],
    *,
    seed: int,
    max_joins: int = 2,
    max_upper: int = 2,
    capacity_scale: float = 1.0,
) -> QueryPlan:
    """Draw a plan of ``n_queries`` select-project-join queries over ``streams``.

    See Jiang & Chakravarthy (2003), §5.1.

    Each query selects on 1 to ``max_joins + 1`` distinct streams (fast, selective leaves),
    joins them left-deep, then applies up to ``max_upper`` slower select/project operators.
    Selectivities are uniform in (0, 1] except joins, which may exceed 1. Capacities (tuples
    per time unit) are drawn per kind and multiplied by ``capacity_scale``.
    """
    if n_queries < 1 or not streams or capacity_scale <= 0:
        raise ConfigError("need n_queries >= 1, at least one stream and capacity_scale > 0")
    rng = np.random.default_rng(seed)
    ops: list[OperatorDef] = []
    s = capacity_scale
    for q in range(n_queries):
        k = int(rng.integers(1, min(max_joins + 1, len(streams)) + 1))
        picked = [streams[int(i)] for i in rng.choice(len(streams), size=k, replace=False)]
        tops = [_op(ops, f"q{q}_sel_{x}", OperatorKind.SELECT, (x,), rng, 2 * s, 8 * s, 1.0)
                for x in picked]
        top = tops[0]
        for j, other in enumerate(tops[1:]):
            top = _op(ops, f"q{q}_join{j}", OperatorKind.JOIN, (top, other), rng, 0.2 * s, s, 1.5)
        for u in range(int(rng.integers(0, max_upper + 1))):
            kind = OperatorKind.PROJECT if rng.random() < 0.5 else OperatorKind.SELECT
            top = _op(ops, f"q{q}_up{u}", kind, (top,), rng, 0.3 * s, 2 * s, 1.0)
    return QueryPlan(ops)


def _op(
    ops: list[OperatorDef], op_id: str, kind: OperatorKind, inputs: tuple[str, ...],
    rng: np.random.Generator, cap_lo: float, cap_hi: float, sel_hi: float,
) -> str:
    selectivity = 1.0 if kind is OperatorKind.PROJECT else float(rng.uniform(0.05, sel_hi))
    capacity = float(rng.uniform(cap_lo, cap_hi))
    ops.append(OperatorDef(op_id, kind, inputs, selectivity=round(selectivity, 3),
                           capacity=round(capacity, 3)))
    return op_id
