"""Run the compatibility suite on every supported pyspark line, each in a fresh environment.

``make test-compat`` (CI runs it) calls ``python -m tests.spark.compat.lines``. It builds the wheel
from the working tree once, then for each line of :data:`LINES`:

1. creates a fresh virtual environment with that line's Python where this machine has it
   (else the running interpreter's, and the table says so) and installs the user's Spark:
   ``pyspark==<line>``, as a user's environment would hold it;
2. installs the built wheel **with its dependencies**, as a user would (``pip install
   <wheel>``), and fails when pip changed the installed pyspark;
3. runs ``tests/spark/compat`` from a copy of ``tests/`` outside the checkout, so the package is
   imported from the installed wheel, never from the working tree, with the digests of each
   door's rows written to a file;
4. after all lines, compares every door's digest across the lines.

``--jobs N`` installs and tests N lines at once (``make test-compat`` runs two).

Prints one line per pyspark line and door; exits non-zero when any step fails. pip's cache
(``~/.cache/pip``) makes the installs fast after the first run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
#: (pyspark version, preferred Python) per supported line; Python spread over the lines so that
#: every supported interpreter is exercised once (pyspark 4.3 needs Python 3.11 or newer).
LINES = (("4.0.5", "3.10"), ("4.1.4", "3.11"), ("4.2.1", "3.12"), ("4.3.0", "3.13"))
TEST_REQUIREMENTS = ("pytest>=8", "hypothesis>=6.100")


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` (e.g. ``3.12``) on PATH or under pyenv; None if none runs."""
    candidates = [shutil.which(f"python{version}") or ""]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin",
                                                f"python{version}")), reverse=True)
    for path in filter(None, candidates):
        done = subprocess.run([path, "-c", "import sys, venv; print(sys.version_info[:2])"],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == str(tuple(map(int,
                                                                          version.split(".")))):
            return path
    return None


def run(cmd: list[str], cwd: Path | None = None) -> str:
    """Run ``cmd``; its standard output. On failure print what it printed and raise."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        raise RuntimeError(f"failed ({done.returncode}): {' '.join(cmd)}")
    return done.stdout


def copy_sources(target: Path) -> Path:
    """The working tree's tracked and new files (what a clone would hold) copied to ``target``."""
    files = run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"])
    for name in files.splitlines():
        if (REPO / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)
    return target


def build_wheel(scratch: Path) -> Path:
    """The wheel of the working tree, built outside the checkout."""
    source = copy_sources(scratch / "source")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(source),
         "-w", str(scratch / "dist")])
    (wheel,) = (scratch / "dist").glob("spark_stream_sched-*.whl")
    return wheel


@dataclass
class LineResult:
    """What one line's run installed and found."""

    pyspark: str
    python: str
    fallback_python: bool
    seconds: float
    doors: dict[str, str]


def one_line(pyspark: str, wanted_python: str, wheel: Path, scratch: Path) -> LineResult:
    """Install and test one line (module docstring, steps 1-3)."""
    found_python = find_python(wanted_python)
    env_dir = scratch / f"pyspark-{pyspark}"
    run([found_python or sys.executable, "-m", "venv", str(env_dir)])
    python = str(env_dir / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-compile"]
    run([*pip, f"pyspark=={pyspark}"])
    run([*pip, str(wheel), *TEST_REQUIREMENTS])
    kept = run([python, "-c", "import pyspark; print(pyspark.__version__)"]).strip()
    if kept != pyspark:
        raise RuntimeError(f"pip install of the wheel replaced pyspark {pyspark} by {kept}")
    suite = scratch / f"suite-{pyspark}"
    shutil.copytree(REPO / "tests", suite / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", suite / "pyproject.toml")  # markers, options
    digests = scratch / f"digests-{pyspark}.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(COMPAT_DIGESTS=str(digests), PYSPARK_PYTHON=python,
               PYSPARK_DRIVER_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    started = time.monotonic()
    done = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "ignore::pytest.PytestConfigWarning", "-m",
                           "compat", "tests/spark/compat"], cwd=suite, env=env, check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"== pyspark {pyspark} (Python {wanted_python} wanted)\n{done.stdout}", flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"the compatibility suite failed on pyspark {pyspark}")
    written = json.loads(digests.read_text())
    return LineResult(pyspark, written["python"], found_python is None,
                      round(time.monotonic() - started), written["doors"])


def report(results: list[LineResult]) -> list[str]:
    """Print the table of lines and doors; the doors whose rows differ between lines."""
    doors = sorted({d for r in results for d in r.doors})
    print(f"\n{'pyspark':8} {'python':8} {'s':>4}  " + "  ".join(f"{d:>20}" for d in doors))
    for r in results:
        cells = "  ".join(f"{r.doors.get(d, '-')[:12]:>20}" for d in doors)
        note = "  (wanted Python missing: ran on the default)" if r.fallback_python else ""
        print(f"{r.pyspark:8} {r.python:8} {r.seconds:>4.0f}  {cells}{note}")
    return [d for d in doors if len({r.doors.get(d) for r in results}) != 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default=",".join(p for p, _ in LINES),
                        help="pyspark versions to test, comma-separated (default: all)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="lines installed and tested at once (default 1); each line's "
                             "output is printed whole when it finishes")
    args = parser.parse_args(argv)
    chosen = [(p, py) for p, py in LINES if p in args.lines.split(",")]
    with tempfile.TemporaryDirectory(prefix="compat-lines-") as tmp:
        wheel = build_wheel(Path(tmp))
        print(f"built {wheel.name}; testing {len(chosen)} lines, {args.jobs} at a time",
              flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(one_line, p, py, wheel, Path(tmp)) for p, py in chosen]
            wait(futures)
    failed = [str(f.exception()) for f in futures if f.exception() is not None]
    if failed:
        print("\n".join(failed), file=sys.stderr)
        return 1
    results = [f.result() for f in futures]
    differ = report(results)
    if differ:
        print(f"rows differ between the lines for: {differ}", file=sys.stderr)
        return 1
    print(f"every door gave the same rows on {len(results)} pyspark lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
