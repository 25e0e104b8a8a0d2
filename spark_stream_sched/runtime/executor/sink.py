"""The sink: collects what the roots of a plan output, in sequential order.

See Prasaad et al. (2018), §4.

A root's output packets may arrive out of order when several workers run stateless operators
below it; the sink keeps a reorder buffer per root and delivers packets strictly by sequence
number, so the collected output is the same for every strategy and worker count. A packet is
*output* (for latency, Jiang & Chakravarthy (2003), §5.2) when the sink delivers it.
"""

from __future__ import annotations

import pyarrow as pa

from spark_stream_sched.runtime.executor.queues import Packet, PacketQueue
from spark_stream_sched.runtime.metrics import PlanMetrics
from spark_stream_sched.runtime.plan.operators import QueueId


class Sink:
    """Ordered collection of every root's output.

    Parameters
    ----------
    roots
        Root operator ids with their output schemas.
    metrics
        Receives one ``output`` event per delivered packet.

    Notes
    -----
    Not thread-safe: the engine calls it under the request lock.
    """

    def __init__(self, roots: dict[str, pa.Schema], metrics: PlanMetrics) -> None:
        self.schemas = dict(roots)
        self.metrics = metrics
        self._buffers = {r: PacketQueue(QueueId(r, "<sink>"), ordered=True) for r in roots}
        self._tables: dict[str, list[pa.Table]] = {r: [] for r in roots}
        self.rows = 0

    def push(self, root: str, packet: Packet, now: float) -> None:
        """Accept an output packet of ``root``; deliver every packet now in order."""
        buffer = self._buffers[root]
        buffer.push(packet)
        while (ready := buffer.take()) is not None:
            self._tables[root].append(ready.table)
            self.rows += ready.rows
            self.metrics.output(now, root, ready.rows, ready.arrival)

    def close(self, root: str, total: int) -> None:
        """``root`` will output exactly ``total`` packets."""
        self._buffers[root].close(total)

    @property
    def complete(self) -> bool:
        """Every root closed and every one of its packets delivered."""
        return all(b.drained for b in self._buffers.values())

    def tables(self) -> dict[str, pa.Table]:
        """The output of each root: its packets concatenated in order."""
        return {
            r: pa.concat_tables(parts) if parts else self.schemas[r].empty_table()
            for r, parts in self._tables.items()
        }
