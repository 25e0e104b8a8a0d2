"""Every example of the README runs as written, from the repository root, with a clean
environment: no activated virtual environment, no PYSPARK_PYTHON, only the system PATH.

The README is the user's contract (its code blocks are read from the file, not copied here).
Two commands are not run: ``make test`` (this suite itself) and the docker-compose block, whose
four commands need root and Docker and are run, as written, by the ``compose`` cluster tests
(``integration/compose.py``: ``docker/build-images.sh``, ``docker-compose up -d master worker-1
worker-2``, ``docker-compose run --rm job``, ``docker-compose down``); a test below checks that
the README still shows exactly those commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
COMPOSE_COMMANDS = ["docker/build-images.sh", "docker-compose up -d master worker-1 worker-2",
                    "docker-compose run --rm job", "docker-compose down"]

pytestmark = pytest.mark.spark


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def commands(block: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blanks dropped."""
    joined = block.replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def clean_env() -> dict[str, str]:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "LANG": "C.UTF-8"}
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def run(command: list[str] | str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, shell=isinstance(command, str), cwd=REPO, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{command!r} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def demo() -> int:
    """Run the quick start's ``make demo``; return the number of result rows it wrote."""
    quick_start = commands(blocks("bash")[0])
    assert quick_start == ["make demo", "make test"]
    out = run(["bash", "-c", quick_start[0]]).stdout
    assert "rows out" in out
    return int(pq.read_table(REPO / "demo-output" / "output").num_rows)


def test_the_python_example_runs_from_a_plain_interpreter(demo: int, tmp_path: Path) -> None:
    (python_block,) = blocks("python")
    script = tmp_path / "example.py"
    script.write_text(python_block, encoding="utf-8")
    shutil.rmtree(REPO / "demo-output" / "example", ignore_errors=True)
    out = run([str(REPO / ".venv" / "bin" / "python"), str(script)]).stdout
    assert out.strip().splitlines()[-1] == f"{demo} windows"  # same windows as the demo's


def test_the_same_job_runs_three_ways(demo: int) -> None:
    three_ways = [b for b in blocks("bash") if "conf/smart_grid.toml" in b]
    assert len(three_ways) == 1
    lines = commands(three_ways[0])
    assert len(lines) == 3
    for line in lines:
        out = run(["bash", "-c", line]).stdout
        assert "rows out" in out, line


def test_the_standalone_command_line_examples_run(demo: int) -> None:
    cli = [b for b in blocks("bash") if "spark-stream-sched aggregate" in b and "--op" not in b]
    assert len(cli) == 1
    target = REPO / "demo-output" / "windows.csv"
    target.unlink(missing_ok=True)
    for line in commands(cli[0]):
        run(["bash", "-c", line])
    assert target.stat().st_size > 0
    assert target.read_text().splitlines()[0].startswith('"window_start","window_end","meter"')


def test_the_compose_block_shows_the_commands_the_compose_tests_run() -> None:
    compose = [b for b in blocks("bash") if "docker-compose" in b]
    assert len(compose) == 1
    assert commands(compose[0]) == COMPOSE_COMMANDS
    source = (REPO / "integration" / "compose.py").read_text()
    assert '"build-images.sh"' in source
    assert '"up", "-d", "master", "worker-1", "worker-2"' in source
    assert '"run", "--rm", "job"' in source
    assert '"down"' in source


def test_the_keyed_operator_examples_run(demo: int) -> None:
    keyed = [b for b in blocks("bash") if "smart_grid_keyed.toml" in b]
    assert len(keyed) == 1
    run_line, sessions_line, join_line = commands(keyed[0])
    out = run(["bash", "-c", run_line]).stdout
    assert "rows out" in out
    assert "net_change" in out  # the windows over the per-meter changes
    target = REPO / "demo-output" / "sessions.csv"
    target.unlink(missing_ok=True)
    run(["bash", "-c", sessions_line])
    lines = target.read_text().splitlines()
    assert lines[0] == '"session_start","session_end","meter","readings","first_v"'
    assert len(lines) > 100
    joined = REPO / "demo-output" / "joined.csv"
    joined.unlink(missing_ok=True)
    run(["bash", "-c", join_line])
    assert joined.read_text().splitlines()[0] == (
        '"window_start","window_end","meter","pairs","total","first_v1"')
    assert len(joined.read_text().splitlines()) > 100
    # the same query without a budget (nothing spills) gives the same bytes
    unbudgeted = join_line.replace(", budget=16k", "").replace("joined.csv", "joined-ref.csv")
    assert unbudgeted != join_line
    run(["bash", "-c", unbudgeted])
    assert joined.read_bytes() == (REPO / "demo-output" / "joined-ref.csv").read_bytes()
