"""Every example of the README runs as written, from the repository root, with a clean
environment: no activated virtual environment, no PYSPARK_PYTHON, only the system PATH.

"The repository root" is a temporary copy of the checkout's files that the examples read
(``Makefile``, ``pyproject.toml``, ``conf/``, the ``spark-submit`` job script) next to a link to
the checkout's ``.venv``: the examples write ``demo-output/`` and checkpoints, and in the user's
own checkout those would make the user's next ``make demo`` or ``run`` find its work done.

The README is the user's contract (its code blocks are read from the file, not copied here).
Each door's guide (docs/source.md, docs/sink.md, docs/transform.md) shows the README's example
with a line that prints the first windows, and the output it gives: the tests run the guide's
block, which must begin with the README's, and compare what it prints with the guide's.
Two commands are not run: ``make test`` (this suite itself) and the docker-compose block, whose
four commands need root and Docker and are run, as written, by the ``compose`` cluster tests
(``integration/compose.py``: ``docker/build-images.sh``, ``docker-compose up -d master worker-1
worker-2``, ``docker-compose run --rm job``, ``docker-compose down``); a test below checks that
the README still shows exactly those commands.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.progress import ordered_progress

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
#: What the README's examples read from the repository root (besides ``.venv``).
COPIED = ["Makefile", "pyproject.toml", "conf", "spark_stream_sched/jobs/ordered_agg_job.py"]
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


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary repository root: the files the examples read, and a link to ``.venv``.

    ``pyproject.toml`` gets the install stamp's time, so ``make`` never reinstalls the project
    from the copy (that would point the checkout's ``.venv`` at this temporary directory).
    """
    stamp = REPO / ".venv" / ".installed"
    assert stamp.exists(), ("the README's examples use the checkout's .venv: run "
                            "`make .venv/.installed` (or `make test`) first")
    root = tmp_path_factory.mktemp("checkout")
    for name in COPIED:
        source, target = REPO / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    installed = stamp.stat().st_mtime_ns
    os.utime(root / "pyproject.toml", ns=(installed, installed))
    (root / ".venv").symlink_to(REPO / ".venv", target_is_directory=True)
    return root


def run(command: list[str] | str, root: Path,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in the repository root ``root`` with the clean environment."""
    done = subprocess.run(command, shell=isinstance(command, str), cwd=root, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{command!r} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def demo(root: Path) -> int:
    """Run the quick start's ``make demo``; return the number of result rows it wrote."""
    (quick_start,) = [commands(b) for b in blocks("bash") if "make demo" in b]
    assert quick_start == ["make demo", "make test"]
    out = run(["bash", "-c", quick_start[0]], root).stdout
    assert "rows out" in out
    return int(pq.read_table(root / "demo-output" / "output").num_rows)


#: Where each entry point's example (source, sink, ``ordered()``) writes its windows.
WINDOWS = {"source": "demo-output/example/windows", "sink": "demo-output/example-sink/windows",
           "ordered": "demo-output/example-ordered/windows"}


#: Each door's guide, whose example is the README's block and a line that shows its windows.
GUIDES = {"source": "docs/source.md", "sink": "docs/sink.md", "ordered": "docs/transform.md"}


def guide_example(door: str) -> tuple[str, str]:
    """The Python block of ``door``'s guide, section "Example", and its expected output."""
    text = (REPO / GUIDES[door]).read_text(encoding="utf-8")
    example = re.search(r"^## Example\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert example, f"{GUIDES[door]} has no section '## Example'"
    (code,) = re.findall(r"^```python\n(.*?)^```", example.group(1), flags=re.S | re.M)
    (expected,) = re.findall(r"^```text\n(.*?)^```", example.group(1), flags=re.S | re.M)
    return code, expected


def run_python_block(door: str, root: Path, tmp_path: Path) -> str:
    """Run the README's Python example of ``door`` as written, with the lines its guide adds;
    check the output the guide shows; return the standard output."""
    (block,) = [b for b in blocks("python") if WINDOWS[door] in b]
    code, expected = guide_example(door)
    assert code.startswith(block), f"the example of {GUIDES[door]} is not the README's block"
    assert code != block  # the guide shows some windows too
    script = tmp_path / f"example_{door}.py"
    script.write_text(code, encoding="utf-8")
    out = run([str(root / ".venv" / "bin" / "python"), str(script)], root).stdout
    assert out == expected, f"{GUIDES[door]}: the example printed\n{out}"
    return out


def windows(root: Path, door: str) -> pa.Table:
    """The windows ``door``'s example wrote, sorted by the output order."""
    table = pq.read_table(root / WINDOWS[door])
    return table.sort_by([("window_end", "ascending"), ("window_start", "ascending"),
                          ("meter", "ascending")])


@pytest.fixture(scope="module")
def source_example(demo: int, root: Path, tmp_path_factory: pytest.TempPathFactory) -> pa.Table:
    """Run the source's example; return its windows."""
    out = run_python_block("source", root, tmp_path_factory.mktemp("source"))
    assert out.splitlines()[0] == f"{demo} windows"  # same windows as the demo's
    return windows(root, "source")


#: What the Monitoring block's ``report`` line of each door reads.
RECORDED = {"source": "demo-output/example/state",
            "sink": "demo-output/example-sink/checkpoint/ordered-agg-sink",
            "ordered": "demo-output/example-ordered/progress.jsonl"}


def check_report(door: str, root: Path, demo: int) -> None:
    """Run the Monitoring block's ``report`` of ``door``: a PNG, and every window counted."""
    (block,) = [b for b in blocks("bash") if "spark-stream-sched report" in b]
    (line,) = [c for c in commands(block) if RECORDED[door] in c]
    out = run(["bash", "-c", line], root).stdout.splitlines()
    png = line.split("--out ")[1].split()[0]
    assert out[-1] == f"wrote {png}"
    assert (root / png).read_bytes().startswith(b"\x89PNG")
    header = out[0].split("  ")
    assert [h.strip() for h in header if h.strip()][:3] == ["batch", "rows in", "windows out"]
    rows = [line.split() for line in out[2:-1]]
    assert sum(int(r[1].replace(",", "")) for r in rows) == 100_000  # the demo's readings
    assert sum(int(r[2].replace(",", "")) for r in rows) == demo


def test_the_readme_has_one_python_example_per_entry_point() -> None:
    assert len(blocks("python")) == len(WINDOWS)


def test_the_python_example_runs_from_a_plain_interpreter(source_example: pa.Table, demo: int,
                                                          root: Path) -> None:
    assert source_example.num_rows > 1000
    check_report("source", root, demo)


@pytest.mark.slow
@pytest.mark.parametrize("door", ["sink", "ordered"])
def test_the_sink_and_ordered_examples_give_the_source_s_windows(
        door: str, demo: int, source_example: pa.Table, root: Path, tmp_path: Path) -> None:
    out = run_python_block(door, root, tmp_path)
    assert out.splitlines()[0] == f"{demo} windows"
    got = windows(root, door)
    assert got.column_names == source_example.column_names
    assert got.schema == source_example.schema
    assert got.equals(source_example)  # bit for bit, first() and float averages included
    check_report(door, root, demo)
    if door == "ordered":  # Spark's progress carries the operator's state and the inputs' ends
        saved = (root / RECORDED[door]).read_text().splitlines()
        *_, last = ordered_progress([json.loads(line) for line in saved])
        assert last["lag_ms"] == 0
        assert last["state_bytes"] is not None


@pytest.mark.slow
def test_the_same_job_runs_three_ways(demo: int, root: Path) -> None:
    three_ways = [b for b in blocks("bash") if "conf/smart_grid.toml" in b]
    assert len(three_ways) == 1
    lines = commands(three_ways[0])
    assert len(lines) == 3
    for line in lines:
        out = run(["bash", "-c", line], root).stdout
        assert "rows out" in out, line


def test_the_standalone_command_line_examples_run(demo: int, root: Path) -> None:
    cli = [b for b in blocks("bash") if "spark-stream-sched aggregate" in b and "--op" not in b]
    assert len(cli) == 1
    target = root / "demo-output" / "windows.csv"
    assert not target.exists()
    for line in commands(cli[0]):
        run(["bash", "-c", line], root)
    assert target.stat().st_size > 0
    assert target.read_text().splitlines()[0].startswith('"window_start","window_end","meter"')


@pytest.mark.slow
def test_the_install_block_installs_the_wheel_and_keeps_the_users_pyspark(
        tmp_path: Path) -> None:
    """The Install block, as written, in a copy of the checkout with a fresh venv first on PATH."""
    import pyspark

    from tests.spark.compat.lines import copy_sources

    (install,) = [commands(b) for b in blocks("bash") if "pip wheel" in b]
    checkout = copy_sources(tmp_path / "checkout")
    venv = tmp_path / "users-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    f"pyspark=={pyspark.__version__}"], check=True, timeout=900)
    env = {**clean_env(), "PATH": f"{venv / 'bin'}:{clean_env()['PATH']}"}
    for line in install:
        done = subprocess.run(["bash", "-c", line], cwd=checkout, env=env, capture_output=True,
                              text=True, timeout=900, check=False)
        assert done.returncode == 0, (line, done.stderr[-3000:])
    check = ("import importlib.util, pyspark; print(pyspark.__version__, "
             "importlib.util.find_spec('pyspark_ordered_agg') is not None)")
    out = subprocess.run([python, "-c", check], cwd=tmp_path, env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == [pyspark.__version__, "True"]
    help_text = subprocess.run([str(venv / "bin" / "spark-stream-sched"), "--help"], env=env,
                               capture_output=True, text=True, check=True).stdout
    assert "aggregate" in help_text


def test_the_compose_block_shows_the_commands_the_compose_tests_run() -> None:
    compose = [b for b in blocks("bash") if "docker-compose" in b]
    assert len(compose) == 1
    assert commands(compose[0]) == COMPOSE_COMMANDS
    source = (REPO / "integration" / "compose.py").read_text()
    assert '"build-images.sh"' in source
    assert '"up", "-d", "master", "worker-1", "worker-2"' in source
    assert '"run", "--rm", "job"' in source
    assert '"down"' in source


@pytest.mark.slow
def test_the_keyed_operator_examples_run(demo: int, root: Path) -> None:
    keyed = [b for b in blocks("bash") if "smart_grid_keyed.toml" in b]
    assert len(keyed) == 1
    run_line, sessions_line, join_line = commands(keyed[0])
    out = run(["bash", "-c", run_line], root).stdout
    assert "rows out" in out
    assert "net_change" in out  # the windows over the per-meter changes
    target = root / "demo-output" / "sessions.csv"
    assert not target.exists()
    run(["bash", "-c", sessions_line], root)
    lines = target.read_text().splitlines()
    assert lines[0] == '"session_start","session_end","meter","readings","first_v"'
    assert len(lines) > 100
    joined = root / "demo-output" / "joined.csv"
    assert not joined.exists()
    run(["bash", "-c", join_line], root)
    assert joined.read_text().splitlines()[0] == (
        '"window_start","window_end","meter","pairs","total","first_v1"')
    assert len(joined.read_text().splitlines()) > 100
    # the same query without a budget (nothing spills) gives the same bytes
    unbudgeted = join_line.replace(", budget=16k", "").replace("joined.csv", "joined-ref.csv")
    assert unbudgeted != join_line
    run(["bash", "-c", unbudgeted], root)
    assert joined.read_bytes() == (root / "demo-output" / "joined-ref.csv").read_bytes()


def test_the_readme_stays_short_and_its_documents_exist() -> None:
    assert len(README.splitlines()) <= 280
    named = set(re.findall(r"docs/[\w./-]+\.md", README))
    assert {"docs/options.md", "docs/benchmarks.md", "docs/references.md"} <= named
    assert [n for n in sorted(named) if not (REPO / n).is_file()] == []
