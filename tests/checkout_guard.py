"""Tests leave the checkout alone: find the files a test run wrote into the repository.

The conftest takes a :func:`snapshot` of the checkout's files that git does not track when the
session starts and, when it finishes, fails the run if :func:`written_since` finds any that
git *ignores* were created, changed or removed (``demo-output/``, ``spark-warehouse/``,
``derby.log``, ...): those hide from ``git status``, yet make the user's next ``make demo`` or
``run`` find its work done. Tracked and untracked-but-not-ignored files are left to CI's ``git
status --porcelain`` check (``.ci/run``), because a developer edits and creates those while the
suite runs. Tool caches (``__pycache__``, ``.pytest_cache``, ``.hypothesis``, ``.mypy_cache``,
``.ruff_cache``), ``.venv`` and ``*.egg-info`` are not looked at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

#: Directories never looked into: git's own, the venv, and caches of the tools tests run.
SKIPPED_DIRS = frozenset({".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis",
                          ".mypy_cache", ".ruff_cache"})

#: relative path -> (mtime in ns, size) of one file
Snapshot = dict[str, tuple[int, int]]


def _git(root: Path, *args: str, stdin: str | None = None) -> str | None:
    """Output of ``git -C root args`` (``None`` when git is missing or fails)."""
    if shutil.which("git") is None:
        return None
    done = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True,
                          text=True, check=False)
    return done.stdout if done.returncode in (0, 1) else None  # check-ignore: 1 = none ignored


def is_checkout(root: Path) -> bool:
    """Whether ``root`` is the top of a git work tree (not, e.g., an unpacked sdist)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    return top is not None and Path(top.strip()).resolve() == root.resolve()


def snapshot(root: Path) -> Snapshot:
    """The files under ``root`` that git does not track, with their mtime and size."""
    tracked = set((_git(root, "ls-files", "-z") or "").split("\0"))
    found: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            if name in SKIPPED_DIRS:  # a worktree's .git is a file
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            if relative not in tracked:
                st = os.lstat(path)
                found[relative] = (st.st_mtime_ns, st.st_size)
    return found


def written_since(root: Path, before: Snapshot) -> list[str]:
    """Git-ignored files under ``root`` created, changed or removed since ``before``.

    Each entry reads ``"created <path>"``, ``"changed <path>"`` or ``"removed <path>"``.
    """
    after = snapshot(root)
    touched = {p: "created" if p not in before else "changed"
               for p, stat in after.items() if before.get(p) != stat}
    touched |= {p: "removed" for p in before.keys() - after.keys()}
    if not touched:
        return []
    ignored = set((_git(root, "check-ignore", "--no-index", "--stdin", "-z",
                        stdin="\0".join(touched)) or "").split("\0"))
    return [f"{touched[p]} {p}" for p in sorted(touched) if p in ignored]
