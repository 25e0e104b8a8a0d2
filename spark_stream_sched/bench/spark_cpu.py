"""CPU time of the processes Spark runs under this benchmark, read from ``/proc`` (Linux).

``bench spark`` starts Spark in local mode, so every process of a query is a descendant of the
bench process: the JVM (driver and executor threads alike) and the Python processes it spawns.
pyspark 4.3 starts each kind of Python process from a daemon whose command line names the
worker module (``python -m pyspark.daemon <module>``), and the workers it forks keep that command
line, so the module says who a process works for:

======================================================  ========  ===========================
module                                                  role      runs
======================================================  ========  ===========================
``pyspark.worker``                                      tasks     the tasks' Python code: a
                                                                  sink's ``write()``,
                                                                  ``mapInArrow``, a source's
                                                                  ``read()``, the
                                                                  transformation's processor
``pyspark.sql.worker.python_streaming_sink_runner``     commit    a Python sink's
                                                                  ``commit()`` (driver side)
any other ``pyspark.*`` module                          driver    other driver-side Python:
                                                                  creating and planning data
                                                                  sources, a source's offsets
``java``                                                jvm       Spark itself (driver and
                                                                  executors share one JVM in
                                                                  local mode)
======================================================  ========  ===========================

:class:`ProcessCpu` samples ``utime + stime`` of every descendant every ``interval`` seconds
and sums, per role, what each process used between the first and the last time it was seen
(a process that already ran counts from the start of the measurement). What a process does
after its last sample (at most ``interval`` seconds of its life) is not counted, nor a process
that lives less than one interval: the figures are lower bounds, and ``exited`` counts the
processes that ended during the measurement. The bench process itself (the driver's py4j
client, which also runs ``finish_sink``) is not among them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Seconds between two samples of the process tree.
INTERVAL = 0.1
ROLES = ("tasks", "commit", "driver", "jvm")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def role_of(cmdline: str) -> str | None:
    """The role (module doc table) of a process with this command line, or None."""
    words = cmdline.split()
    if words and os.path.basename(words[0]) == "java":
        return "jvm"
    module = next((after for before, after in zip(words, words[1:], strict=False)
                   if before in ("-m", "pyspark.daemon") and after != "pyspark.daemon"), "")
    if module == "pyspark.worker":
        return "tasks"
    if module.endswith("python_streaming_sink_runner"):
        return "commit"
    return "driver" if module.startswith("pyspark.") else None


def _stat(pid: str) -> tuple[int, int, float] | None:
    """``(ppid, start time in ticks, CPU seconds)`` of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2:].split()  # after "pid (comm) "
    # fields[0] is the state: ppid is field 4 of stat(5), utime 14, stime 15, starttime 22
    return int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / _TICKS


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class _Seen:
    role: str | None
    first: float
    last: float


@dataclass
class ProcessCpu:
    """Samples the CPU time of the descendants of ``root`` by role (module doc)."""

    root: int = field(default_factory=os.getpid)
    interval: float = INTERVAL
    seen: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    alive: set[tuple[int, int]] = field(default_factory=set)
    exited: int = 0

    def sample(self) -> None:
        """Read every descendant's CPU time once."""
        stats = {int(p): s for p in os.listdir("/proc") if p.isdigit()
                 and (s := _stat(p)) is not None}
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        alive, stack = set(), list(children.get(self.root, []))
        while stack:
            pid = stack.pop()
            stack += children.get(pid, [])
            key, cpu = (pid, stats[pid][1]), stats[pid][2]
            alive.add(key)
            if key in self.seen:
                self.seen[key].last = cpu
            else:  # appeared since the last sample: everything it used counts
                self.seen[key] = _Seen(role_of(_cmdline(pid)), 0.0, cpu)
        self.exited += len(self.alive - alive)
        self.alive = alive

    def by_role(self) -> dict[str, float]:
        """CPU seconds per role between the first sample and the latest one."""
        totals = dict.fromkeys(ROLES, 0.0)
        for process in self.seen.values():
            if process.role is not None:
                totals[process.role] += process.last - process.first
        return {role: round(seconds, 3) for role, seconds in totals.items()}


@contextmanager
def measure() -> Iterator[ProcessCpu]:
    """Sample in a background thread while the block runs (the first sample is the baseline).

    The baseline sample counts processes that already exist from their current CPU time;
    every process that appears later counts from zero.
    """
    cpu = ProcessCpu()
    cpu.sample()
    for process in cpu.seen.values():
        process.first = process.last
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(cpu.interval):
            cpu.sample()

    thread = threading.Thread(target=loop, name="bench-process-cpu", daemon=True)
    thread.start()
    try:
        yield cpu
    finally:
        stop.set()
        thread.join()
        cpu.sample()
