"""The whole package passes ruff and mypy --strict (the settings in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=REPO, capture_output=True,
                          text=True, check=False)


def test_ruff_is_clean() -> None:
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout[-4000:]


def test_mypy_strict_is_clean_on_the_whole_package() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "Success" in done.stdout
