"""Render docs/options.md from the one declaration of the settings (:mod:`.table`).

Run ``python -m spark_stream_sched.options.reference > docs/options.md`` after changing
:mod:`.table`; ``tests/test_options_reference.py`` fails while the file differs.
"""

from __future__ import annotations

import sys

from spark_stream_sched.options.table import DOORS, GROUPS, Setting

COMMAND = "python -m spark_stream_sched.options.reference > docs/options.md"
HEADINGS = {"source": "source option", "sink": "sink option", "ordered": "`ordered()`",
            "toml": "TOML key", "cli": "command line"}
INTRO = f"""# Options

<!-- Generated from spark_stream_sched/options/table.py by `{COMMAND}`;
     edit the table, not this file. -->

Every setting of every front door, side by side where they are the same setting: the
`ordered-agg` **source** (`spark.readStream.format("ordered-agg").option(name, value)`), the
**sink** (`df.writeStream.format("ordered-agg").option(name, value)`), the **`ordered()`**
transformation (`spark_stream_sched.spark.transform.ordered`), the **TOML** job configs
(`spark-stream-sched run conf/....toml`, `spark-submit`) and the **command line**
(`spark-stream-sched aggregate`, no Spark). Option names are case-insensitive; an unknown one
fails when the query is defined, with a suggestion. The options that define the query are
recorded at first start, and a restart with a changed one fails naming both values.

More on each: docs/source.md, docs/sink.md, docs/transform.md, docs/keyed.md (operators),
docs/aggregates.md (aggregates), docs/state_store.md (adaptation, state, retention).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if text else "–"


def render_group(title: str, group: tuple[Setting, ...]) -> str:
    """One section: a table with the front doors this group uses, then type, default, meaning."""
    doors = [d for d in DOORS if any(getattr(s, d) for s in group)]
    header = [HEADINGS[d] for d in doors] + ["type / range", "default", "meaning"]
    lines = [f"## {title}", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    for s in group:
        names = [f"`{getattr(s, d)}`" if getattr(s, d) else "" for d in doors]
        cells = [*names, s.kind, s.default, s.meaning]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def render() -> str:
    """The whole of docs/options.md."""
    return "\n".join([INTRO, *(render_group(title, group) for title, group in GROUPS)])


def main() -> int:
    """Write docs/options.md's text to standard output."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
