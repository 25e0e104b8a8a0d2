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

The JVM's CPU is also split by thread (``/proc/<pid>/task/<tid>/stat``, whose ``comm`` is the
first 15 characters of the Java thread's name): ``jvm_tasks``, the executor's task threads
(``Executor task launch worker ...``) and the threads feeding Python workers (``stdout writer
for ...``); ``jvm_runtime``, the JIT compilers and garbage collectors; ``jvm_driver``, the rest
of the JVM's CPU (the total less those two: the driver's threads, the stream execution loop,
the scheduler, RPC, and threads too short-lived to be sampled).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Seconds between two samples of the process tree.
INTERVAL = 0.1
ROLES = ("tasks", "commit", "driver", "jvm")
#: The JVM's CPU by thread (module doc); they add up to ``jvm``.
JVM_PARTS = ("jvm_tasks", "jvm_runtime", "jvm_driver")
#: ``comm`` prefixes of the JVM threads of ``jvm_tasks`` and ``jvm_runtime``.
_THREADS = (("jvm_tasks", ("Executor task", "stdout writer")),
            ("jvm_runtime", ("C1 Compiler", "C2 Compiler", "GC Thread", "G1 ", "VM Thread",
                             "VM Periodic", "Sweeper")))
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


def thread_role(comm: str) -> str | None:
    """``jvm_tasks`` or ``jvm_runtime`` for a JVM thread named ``comm``; None for the rest."""
    return next((role for role, prefixes in _THREADS if comm.startswith(prefixes)), None)


def _stat(path: str) -> tuple[str, int, int, float] | None:
    """``(comm, ppid, start time in ticks, CPU seconds)`` from a ``stat`` file; None if gone."""
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    close = text.rindex(b")")
    comm = text[text.index(b"(") + 1:close].decode(errors="replace")
    fields = text[close + 2:].split()  # after "pid (comm) "
    # fields[0] is the state: ppid is field 4 of stat(5), utime 14, stime 15, starttime 22
    return comm, int(fields[1]), int(fields[19]), (int(fields[11]) + int(fields[12])) / _TICKS


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


#: A process ``(pid, start)`` or a JVM thread ``(pid, start, tid, thread start)``.
_Key = tuple[int, ...]


@dataclass
class ProcessCpu:
    """Samples the CPU time of the descendants of ``root`` by role (module doc).

    A process keeps the role of its command line; a JVM thread's CPU between two samples goes
    to the role of its name at the later one (an executor renames its pooled threads per task,
    and a thread may be first seen before it names itself).
    """

    root: int = field(default_factory=os.getpid)
    interval: float = INTERVAL
    seen: dict[_Key, _Seen] = field(default_factory=dict)
    threads: dict[_Key, float] = field(default_factory=dict)
    thread_cpu: dict[str, float] = field(default_factory=dict)
    alive: set[_Key] = field(default_factory=set)
    exited: int = 0
    #: ``time.monotonic()`` of the baseline and of the latest sample: the window the figures
    #: cover (``wall_s``).
    started: float = 0.0
    latest: float = 0.0

    @property
    def wall_s(self) -> float:
        """Wall seconds between the baseline and the latest sample: the CPU figures' window."""
        return self.latest - self.started

    def baseline(self) -> None:
        """Sample, and count only what every process and thread uses from now on."""
        self.sample()
        self.started = self.latest
        for process in self.seen.values():
            process.first = process.last
        self.thread_cpu.clear()

    def sample(self) -> None:
        """Read every descendant's CPU time once, and every JVM thread's."""
        self.latest = time.monotonic()
        stats = {int(p): s for p in os.listdir("/proc") if p.isdigit()
                 and (s := _stat(f"/proc/{p}/stat")) is not None}
        children: dict[int, list[int]] = {}
        for pid, (_, ppid, _, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        alive: set[_Key] = set()
        stack = list(children.get(self.root, []))
        while stack:
            pid = stack.pop()
            stack += children.get(pid, [])
            key, cpu = (pid, stats[pid][2]), stats[pid][3]
            alive.add(key)
            if key in self.seen:
                self.seen[key].last = cpu
            else:  # appeared since the last sample: everything it used counts
                self.seen[key] = _Seen(role_of(_cmdline(pid)), 0.0, cpu)
            if self.seen[key].role == "jvm":
                self._sample_threads(key)
        self.exited += len(self.alive - alive)
        self.alive = alive

    def _sample_threads(self, process: _Key) -> None:
        """Add each JVM thread's CPU since the last sample to the role of its name."""
        try:
            tids = os.listdir(f"/proc/{process[0]}/task")
        except OSError:
            return
        for tid in tids:
            stat = _stat(f"/proc/{process[0]}/task/{tid}/stat")
            if stat is None:
                continue
            name, _, start, cpu = stat
            key = (*process, int(tid), start)
            role = thread_role(name)
            if role is not None:
                self.thread_cpu[role] = (self.thread_cpu.get(role, 0.0) + cpu
                                         - self.threads.get(key, 0.0))
            self.threads[key] = cpu

    def by_role(self) -> dict[str, float]:
        """CPU seconds per role (and JVM part) between the first sample and the latest one."""
        totals = dict.fromkeys((*ROLES, *JVM_PARTS), 0.0)
        for process in self.seen.values():
            if process.role is not None:
                totals[process.role] += process.last - process.first
        totals.update(self.thread_cpu)
        totals["jvm_driver"] = max(0.0, totals["jvm"] - totals["jvm_tasks"]
                                   - totals["jvm_runtime"])
        return {role: round(seconds, 3) for role, seconds in totals.items()}


@contextmanager
def measure() -> Iterator[ProcessCpu]:
    """Sample in a background thread while the block runs (the first sample is the baseline).

    The baseline sample counts processes that already exist from their current CPU time;
    every process that appears later counts from zero.
    """
    cpu = ProcessCpu()
    cpu.baseline()
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
