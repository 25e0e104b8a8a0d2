"""Seeded sample-data generators and file helpers for demos, tests and benchmarks.

* :mod:`spark_stream_sched.data.smart_grid` -- smart-meter readings forwarded by concentrators.
* :mod:`spark_stream_sched.data.soundcloud` -- SoundCloud-like comments on songs.
* :mod:`spark_stream_sched.data.bursty` -- bursty self-similar arrivals (Pareto ON/OFF flows).

Every generator returns one :class:`pyarrow.Table` per input stream, sorted by ``ts``
(non-decreasing, ties allowed), and is a pure function of its arguments and ``seed``. Streams
are written to and read from files by the input layer, :mod:`spark_stream_sched.inputs`
(``write_inputs``, ``read_input``).
"""

from __future__ import annotations
