"""A real Spark Connect server started from the installed pyspark, for the Connect tests.

pip's pyspark ships the server (``jars/spark-connect_*.jar``); ``sbin/start-connect-server.sh``
only wraps ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` in
``spark-daemon.sh`` (pid files, log rotation, a background fork). Here ``spark-submit`` runs in
the foreground instead, in its own process group: ``spark-submit`` and ``spark-class`` ``exec``
into the JVM, so the child's pid is the server's, and Spark's Python workers are in its group.

The server's Python is ``PYSPARK_PYTHON`` in its environment: a Connect server reads that
variable, not ``spark.pyspark.python``, both for the Python code clients send
(``SparkConnectPlanner.pythonExec``) and for finding installed ``pyspark_*`` data sources
(``PythonUtils.defaultPythonExec``). It is set to this interpreter, so the server's Python
workers import this checkout's package and ``format("ordered-agg")`` is registered by itself.

The server binds 127.0.0.1 on port 0 (the OS picks a free port, so two servers never race for
one) and logs the port it got (``Spark Connect server started at: 127.0.0.1:<port>``), the one
INFO line the log configuration lets through. Everything the server writes (log, local and
warehouse directories, temporary files, its Python workers' working directory) lives in the
directory it is given.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_STARTED = re.compile(r"Spark Connect server started at: [0-9.]+:(\d+)")
_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.started.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.started.level = info
"""


@dataclass
class ConnectServer:
    """A running server: its process (the JVM), port and log file."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The address a client passes to ``SparkSession.builder.remote``."""
        return f"sc://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's log (for failure messages)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def spark_home() -> Path:
    """The installed pyspark package directory (pip's SPARK_HOME)."""
    import pyspark

    return Path(pyspark.__file__).parent


def server_command(work: Path, **conf: str) -> list[str]:
    """``spark-submit`` of the Connect server: local[2], loopback, port 0, ``conf`` on top.

    Settings for the plugin's queries are not here: clients set them (``configure(spark)``).
    """
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "0",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.local.dir": str(work / "local"),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        **conf,
    }
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
               "--name", "Spark Connect server (tests)", "--master", "local[2]",
               "--driver-java-options", f"-Djava.io.tmpdir={work / 'tmp'}"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def start_server(work: Path, timeout_s: float = 240.0, **conf: str) -> ConnectServer:
    """Start a server writing only under ``work``; return once it accepts connections.

    Raises
    ------
    RuntimeError
        The server exited or did not report its port within ``timeout_s``; the message holds
        the end of its log. A server that did not come up is stopped first.
    """
    for name in ("conf", "local", "warehouse", "tmp"):
        (work / name).mkdir(parents=True, exist_ok=True)
    (work / "conf" / "log4j2.properties").write_text(_LOG4J)
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")}
    env |= {"SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(work / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "TMPDIR": str(work / "tmp")}
    log = work / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(server_command(work, **conf), cwd=work, env=env,
                                   stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = ConnectServer(process, 0, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _STARTED.search(log.read_text(errors="replace"))
        if found:
            server.port = int(found.group(1))
            return server
        if process.poll() is not None:
            break
        time.sleep(0.2)  # waiting for another process's log line: nothing to block on
    stop_server(server)
    raise RuntimeError(f"the Spark Connect server did not start (exit code {process.returncode}, "
                       f"{timeout_s:.0f} s); end of {log}:\n{server.log_tail()}")


def stop_server(server: ConnectServer, timeout_s: float = 60.0) -> None:
    """SIGTERM the JVM (Spark stops its context and Python workers); SIGKILL what is left.

    Only the server's own process group is signalled; afterwards none of its processes runs.
    """
    group = server.process.pid  # start_new_session: the group id is the child's pid
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(group, signal.SIGKILL)
            server.process.wait(timeout_s)
    try:
        os.killpg(group, signal.SIGKILL)  # Python workers that outlived the JVM, if any
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(group):
        raise RuntimeError(f"processes {group_members(group)} of the Spark Connect server "
                           f"survived SIGKILL")


def group_members(group: int) -> list[int]:
    """Pids of the live processes in process group ``group`` (from ``/proc``)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(entry.name))
    return members
