"""The documentation holds together: every cross-reference resolves, the README's figures come
from the benchmarks page, the door guides have a guide's parts, and no user page keeps a
measurement history (that lives in ``docs/dev/``).

The examples of the guides, and their expected outputs, are run by ``tests/test_readme.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
#: The pages a user reads: the README and docs/ (not docs/dev/, the contributors' notes).
USER_PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
ALL_PAGES = [*USER_PAGES, *sorted((DOCS / "dev").glob("*.md"))]
#: One guide per door, read top to bottom; its parts in this order.
GUIDES = ["docs/source.md", "docs/sink.md", "docs/transform.md"]
GUIDE_PARTS = ["Example", "Options that matter", "Semantics", "Monitoring", "Performance",
               "Troubleshooting"]
CODE_FILES = [p for pattern in ("spark_stream_sched/**/*.py", "tests/**/*.py", "conf/**/*.toml",
                                "integration/**/*.py", "docker/**/*")
              for p in sorted(REPO.glob(pattern))
              if p.is_file() and p.suffix != ".pyc" and p.name != "test_docs.py"]  # its examples

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
NAMED_FILE = re.compile(r"\bdocs/[\w./-]+\.(?:md|png)\b")
#: ``docs/x.md, "Heading"`` or ``docs/x.md "Heading"``: a section named by its heading.
NAMED_SECTION = re.compile(r"\b(docs/[\w./-]+\.md|README)`*,? \"([^\"]+)\"")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def text_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def without_fenced(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def without_code(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans."""
    return re.sub(r"`[^`\n]*`", "", without_fenced(text))


def headings(path: Path) -> list[str]:
    """The headings of a Markdown page (code blocks left out), without their ``#`` marks."""
    return [line.lstrip("#").strip() for line in without_fenced(text_of(path)).splitlines()
            if line.startswith("#")]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of ``text``."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match, f"no section '## {heading}'"
    return match.group(1)


def test_the_pages_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in ALL_PAGES}
    assert {"README.md", *GUIDES, "docs/byod.md", "docs/benchmarks.md", "docs/monitoring.md",
            "docs/dev/performance-history.md"} <= names
    assert any(p.name == "runner.py" for p in CODE_FILES)


@pytest.mark.parametrize("page", ALL_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_of_a_page_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(without_fenced(text_of(page))):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(REPO)}")
        elif anchor and anchor not in {slug(h) for h in headings(resolved)}:
            broken.append(f"{target}: no heading with anchor #{anchor} in "
                          f"{resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_every_document_the_repository_names_exists() -> None:
    missing = sorted({f"{p.relative_to(REPO)}: {name}"
                      for p in [*ALL_PAGES, REPO / "CHANGELOG.md", *CODE_FILES]
                      for name in NAMED_FILE.findall(text_of(p))
                      if not (REPO / name).exists()})
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_every_section_named_by_its_heading_exists() -> None:
    """``docs/source.md, "Where the rows are read"`` must find that heading (CHANGELOG aside:
    it tells what the pages said then)."""
    missing = []
    for page in [*ALL_PAGES, *CODE_FILES]:
        for doc, title in NAMED_SECTION.findall(text_of(page).replace("\n", " ")):
            target = REPO / ("README.md" if doc == "README" else doc)
            if target.exists() and not any(title.lower() in h.lower() for h in headings(target)):
                missing.append(f"{page.relative_to(REPO)}: {doc}, \"{title}\"")
    assert not missing, "sections named but not found:\n" + "\n".join(missing)


def test_the_patterns_find_what_they_are_for() -> None:
    assert LINK.findall("see [a](b.md#c) and ![p](img/x.png)") == ["b.md#c", "img/x.png"]
    assert NAMED_SECTION.findall('(docs/source.md, "End of input")') == [
        ("docs/source.md", "End of input")]
    assert NAMED_SECTION.findall('``docs/sink.md``, "Where"') == [("docs/sink.md", "Where")]
    assert NAMED_FILE.findall("in docs/dev/bench-spark.md.") == ["docs/dev/bench-spark.md"]
    assert slug("Idle inputs (`idleTimeout`)") == "idle-inputs-idletimeout"
    assert slug("Batch reads (`spark.read`)") == "batch-reads-sparkread"


def test_every_figure_of_the_readme_is_in_the_benchmarks_table() -> None:
    readme = text_of(REPO / "README.md")
    benchmarks = set(NUMBER.findall(text_of(DOCS / "benchmarks.md")))
    performance = section(readme, "Performance")
    intro = readme.split("\n## ", 1)[0]
    figures = NUMBER.findall(performance) + re.findall(r"\d+\.\d+(?=%)", intro)
    assert len(figures) >= 10, figures
    untraced = [f for f in figures if f not in benchmarks]
    assert not untraced, (f"README figures not in docs/benchmarks.md: {untraced}; take them "
                          "from its current tables (and update both together)")
    assert "docs/benchmarks.md" in performance


@pytest.mark.parametrize("guide", GUIDES)
def test_each_door_has_a_guide_read_top_to_bottom(guide: str) -> None:
    parts = [h for h in headings(REPO / guide) if h in GUIDE_PARTS]
    assert parts == GUIDE_PARTS, f"{guide}: its ## parts are {parts}, expected {GUIDE_PARTS}"
    example = section(text_of(REPO / guide), "Example")
    for part in ("```python\n", "Expected output", "```text\n"):
        assert part in example, f"{guide}, Example: no {part!r}"


def test_the_readme_links_the_guides_and_the_user_pages() -> None:
    links = {target.split("#")[0] for target in LINK.findall(text_of(REPO / "README.md"))}
    assert {*GUIDES, "docs/byod.md", "docs/benchmarks.md", "docs/monitoring.md",
            "docs/options.md"} <= links


@pytest.mark.parametrize("page", [p for p in USER_PAGES if p.name != "benchmarks.md"],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_user_page_keeps_a_measurement_history(page: Path) -> None:
    """Dated runs belong on the benchmarks page (the current ones) or in docs/dev/ (the rest)."""
    dated = [line.strip() for line in without_code(text_of(page)).splitlines()
             if re.search(r"\b20\d\d-\d\d-\d\d\b", line)]
    assert not dated, (f"{page.relative_to(REPO)} dates a run (move it to docs/benchmarks.md "
                       f"or docs/dev/): {dated}")
