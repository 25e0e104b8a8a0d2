"""Incremental input: packets enter a running plan as they are produced, not all up front.

Falt & Yaghob (2011), §3.1: "When a packet is received by the operator, it is switched to state
Scheduled
... new task is created" -- input arrives while the plan runs. Queuing a whole batch before
the plan starts leaves every strategy the same peak queue memory (the batch); fed packet by packet,
the input queues grow only as fast as reading outpaces processing, and what stays queued inside the
plan is what the strategy chose not to run (Jiang & Chakravarthy 2003, §2.2: Chain drains the
operators that release the most memory first, FIFO moves the oldest tuple up its path).

:func:`feed_incrementally` is the engine's threaded mode. The calling thread reads the streams
round-robin, packet by packet, and pushes each packet while the workers run; before reading
packet ``k`` of a stream it waits until that stream's input queues hold fewer than
``read_ahead`` untaken packets (bounded read-ahead, no busy waiting: every take from an input
queue signals it). The deterministic single-threaded mode on logical ticks is
:mod:`.stepped`.

Packet ``k`` of a stream has sequence number ``k``, so outputs equal a sequential evaluation
for every strategy and worker count (:mod:`.queues`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa

from spark_stream_sched.runtime.executor.queues import Packet
from spark_stream_sched.runtime.executor.runner import PlanRun

#: Untaken packets per input stream the threaded feeder reads ahead by default.
DEFAULT_READ_AHEAD = 4

Watermark = Callable[[pa.Table], "int | None"]


def feed_incrementally(run: PlanRun, sources: Mapping[str, Iterator[pa.Table]],
                       first: Mapping[str, pa.Table | None], read_ahead: int,
                       watermark: Watermark, timeout: float | None = None) -> None:
    """Push the packets of ``sources`` into ``run`` as they are read, then close the streams.

    Parameters
    ----------
    run
        An open plan run whose workers are running.
    sources
        Stream name -> its packets, in stream order (read lazily, round-robin over streams).
    first
        Packets already read from ``sources`` (pushed before the rest of their stream).
    read_ahead
        Read a stream's next packet only while its input queues hold fewer than this many
        untaken packets (>= 1).
    watermark
        The packet's ready bound (largest event time), or ``None``.
    timeout
        Seconds to wait for room in all; :class:`TimeoutError` when it runs out.

    Notes
    -----
    An exception (a reader error, the timeout) fails ``run`` before it propagates, so no task
    of the run does more work; the caller closes the run.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    pending = {s: t for s, t in first.items() if t is not None}
    seq = dict.fromkeys(sources, 0)
    live = list(sources)
    try:
        while live and run.error is None:
            for stream in list(live):
                left = None if deadline is None else deadline - time.monotonic()
                if not run.wait_for_room(stream, read_ahead, left):
                    raise TimeoutError(f"the plan did not finish within {timeout} s")
                if run.error is not None:
                    return
                table = pending.pop(stream, None)
                if table is None:
                    table = next(sources[stream], None)
                if table is None:
                    run.close_input(stream)
                    live.remove(stream)
                    continue
                run.push_input(stream, Packet(seq[stream], table, run.clock(), watermark(table)))
                seq[stream] += 1
    except BaseException as exc:
        with run.lock:
            run.fail(exc)
        raise
