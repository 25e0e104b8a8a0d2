"""Every reference in the repository resolves for a user: no private shorthand.

Papers are cited by their short form ("Liu & Rundensteiner (2005), §4.2"), with the full titles
in ``docs/references.md``; nothing names the project's internal numbering of the papers, design
notes outside the repository or tracker issues by number -- the changelog included.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The patterns are written so that this file does not match them itself.
UNRESOLVABLE = re.compile(
    r"s[e]ed ?0|DESIGN\.md|STYLE\.md|shared[/]|[i]ssue [0-9]", flags=re.IGNORECASE)
SUFFIXES = {".py", ".md", ".toml"}
SKIPPED_DIRS = {".venv", ".git", "build", "demo-output", "out", "__pycache__", "spark-warehouse",
                "metastore_db", "node_modules"}
SKIPPED_FILES: set[Path] = set()
PAPERS = ["Falt & Yaghob (2011)", "Jiang & Chakravarthy (2003)", "Prasaad et al. (2018)",
          "Liu & Rundensteiner (2005)", "Gulisano et al. (2016)"]


def _files() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        parts = set(path.relative_to(REPO).parts[:-1])
        if (path.suffix in SUFFIXES and path.is_file() and not parts & SKIPPED_DIRS
                and not any(p.endswith(".egg-info") or p.startswith(".") for p in parts)
                and path not in SKIPPED_FILES):
            found.append(path)
    return found


def test_the_scan_covers_the_package_docs_and_tests() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _files()}
    for expected in ["README.md", "docs/references.md", "spark_stream_sched/runtime/merge.py",
                     "tests/test_readme.py", "pyproject.toml"]:
        assert expected in names


def test_no_unresolvable_reference() -> None:
    hits = []
    for path in _files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if UNRESOLVABLE.search(line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not hits, (
        "references a user cannot resolve (cite a paper by its short form, e.g. "
        "'Liu & Rundensteiner (2005), §4.2', listed in docs/references.md; name an in-repo "
        "document instead of a private one; say what an issue was instead of its number):\n"
        + "\n".join(hits))


def test_the_pattern_catches_what_it_is_for() -> None:
    # spelt in pieces so that this file does not match the pattern itself
    for text in ["se" + "ed 003 §4.2", "Se" + "ed 001", "see DESIGN" + ".md §2", "STYLE" + ".md",
                 "../shared" + "/seeds", "is" + "sue 10", "Is" + "sue 7"]:
        assert UNRESOLVABLE.search(text), text
    assert not UNRESOLVABLE.search("seeded generators, a random seed of 42, issues")


def test_references_list_every_paper_the_code_cites() -> None:
    references = (REPO / "docs" / "references.md").read_text(encoding="utf-8")
    cited = "\n".join(p.read_text(encoding="utf-8") for p in _files()
                      if p.name != "references.md")
    for paper in PAPERS:
        assert paper in references, paper
        author = paper.split(" (")[0]
        assert author in cited, f"{author} is listed but cited nowhere"
