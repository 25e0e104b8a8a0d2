"""Per-operator statistics: processing cost per tuple, selectivity and tuple sizes.

Jiang & Chakravarthy (2003), §2.1 assumes "the selectivity and the service time of an operator are
known. Actually, they can be learned easily by collecting statistics information during the
execution period".
:class:`OperatorStats` supports both: give the numbers (the simulator does) or feed measurements
with :meth:`OperatorStats.record` (the executor does) and read running averages. Every change bumps
a version counter, so capacities derived from the statistics can be recomputed on demand.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.plan.operators import OperatorDef


class OperatorStats:
    """Statistics of one operator, given as numbers or learned from measurements.

    Parameters
    ----------
    cost
        Processing time per input tuple (time units, or seconds in a real executor); > 0.
    selectivity
        Output tuples per input tuple (>= 0; a join's is its semi-join selectivity).
    input_tuple_size, output_tuple_size
        Memory units per input / output tuple (bytes in a real executor).
    smoothing
        ``None`` (default): learned values are cumulative averages over all measurements.
        A number in (0, 1]: exponential moving average with that weight per measurement.

    Notes
    -----
    The numbers given here are the prior; the first :meth:`record` replaces them. ``record`` is
    thread-safe (a lock), reads are plain attribute reads.
    """

    def __init__(
        self,
        cost: float = 1.0,
        selectivity: float = 1.0,
        input_tuple_size: float = 1.0,
        output_tuple_size: float = 1.0,
        *,
        smoothing: float | None = None,
    ) -> None:
        if cost <= 0:
            raise ConfigError(f"cost per tuple must be > 0, got {cost}")
        if selectivity < 0 or input_tuple_size < 0 or output_tuple_size < 0:
            raise ConfigError("selectivity and tuple sizes must be >= 0")
        if smoothing is not None and not 0 < smoothing <= 1:
            raise ConfigError(f"smoothing must be in (0, 1], got {smoothing}")
        self.cost = float(cost)
        self.selectivity = float(selectivity)
        self.input_tuple_size = float(input_tuple_size)
        self.output_tuple_size = float(output_tuple_size)
        self.smoothing = smoothing
        self.version = 0
        self.observations = 0
        self._totals = [0.0, 0.0, 0.0, 0.0, 0.0]  # tuples in, out, elapsed, bytes in, out
        self._lock = threading.Lock()

    @property
    def capacity(self) -> float:
        """Operator processing capacity ``C^P_O``: tuples processed per time unit (§2.1)."""
        return 1.0 / self.cost

    def record(
        self,
        tuples_in: float,
        tuples_out: float,
        elapsed: float,
        bytes_in: float | None = None,
        bytes_out: float | None = None,
    ) -> None:
        """Feed one measurement: ``tuples_in`` processed in ``elapsed`` giving ``tuples_out``.

        Measurements with ``tuples_in <= 0`` or ``elapsed <= 0`` are ignored (nothing learned).
        """
        if tuples_in <= 0 or elapsed <= 0:
            return
        with self._lock:
            if self.smoothing is None:
                self._record_cumulative(tuples_in, tuples_out, elapsed, bytes_in, bytes_out)
            else:
                self._record_ema(tuples_in, tuples_out, elapsed, bytes_in, bytes_out)
            self.observations += 1
            self.version += 1

    def _record_cumulative(
        self, n_in: float, n_out: float, dt: float, b_in: float | None, b_out: float | None
    ) -> None:
        t = self._totals
        t[0] += n_in
        t[1] += n_out
        t[2] += dt
        self.cost = t[2] / t[0]
        self.selectivity = t[1] / t[0]
        if b_in is not None:
            t[3] += b_in
            self.input_tuple_size = t[3] / t[0]
        if b_out is not None and t[1] > 0:
            t[4] += b_out
            self.output_tuple_size = t[4] / t[1]

    def _record_ema(
        self, n_in: float, n_out: float, dt: float, b_in: float | None, b_out: float | None
    ) -> None:
        w = 1.0 if self.observations == 0 else float(self.smoothing or 1.0)
        self.cost += w * (dt / n_in - self.cost)
        self.selectivity += w * (n_out / n_in - self.selectivity)
        if b_in is not None:
            self.input_tuple_size += w * (b_in / n_in - self.input_tuple_size)
        if b_out is not None and n_out > 0:
            self.output_tuple_size += w * (b_out / n_out - self.output_tuple_size)

    def __repr__(self) -> str:
        return (
            f"OperatorStats(cost={self.cost:g}, selectivity={self.selectivity:g}, "
            f"input_tuple_size={self.input_tuple_size:g}, "
            f"output_tuple_size={self.output_tuple_size:g})"
        )


class StatsTable(Mapping[str, OperatorStats]):
    """Statistics of every operator of a plan, keyed by operator id.

    ``version`` changes whenever any operator's statistics change, so consumers (strategies)
    can cache capacities and recompute them only when needed.
    """

    def __init__(self, stats: Mapping[str, OperatorStats]) -> None:
        self._stats = dict(stats)

    @classmethod
    def from_defs(cls, defs: Mapping[str, OperatorDef]) -> StatsTable:
        """Build initial statistics from the numbers in the definitions (defaults: 1)."""
        table: dict[str, OperatorStats] = {}
        for op_id, d in defs.items():
            cost = d.cost if d.cost is not None else 1.0 / (d.capacity or 1.0)
            table[op_id] = OperatorStats(
                cost,
                1.0 if d.selectivity is None else d.selectivity,
                1.0 if d.input_tuple_size is None else d.input_tuple_size,
                1.0 if d.output_tuple_size is None else d.output_tuple_size,
            )
        return cls(table)

    @property
    def version(self) -> int:
        """Sum of the operators' versions: changes whenever any statistic changes."""
        return sum(s.version for s in self._stats.values())

    def __getitem__(self, op_id: str) -> OperatorStats:
        return self._stats[op_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stats)

    def __len__(self) -> int:
        return len(self._stats)
