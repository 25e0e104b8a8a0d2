"""Option names and lists as users write them: one normaliser, one suggestion, one splitter.

Every surface that configures a query (Spark source and sink options, the ``[query]`` table of a
TOML job config, CLI flags) matches names with :func:`normalise_options`, suggests with
:func:`did_you_mean` and splits lists with :func:`split_list` / :func:`split_names`, so a typo
gets the same answer everywhere.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.aggregates import split_top_level

_IDENT = re.compile(r"^`?([A-Za-z_][A-Za-z_0-9]*)`?$")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` (case-insensitive), else ``""``."""
    by_lower = {c.lower(): c for c in choices}
    guess = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[guess[0]]!r}?" if guess else ""


def normalise_options(options: Mapping[str, object], names: Iterable[str],
                      required: Iterable[str] = (), what: str = "query") -> dict[str, str]:
    """Map keys in any case to the canonical ``names``; check that ``required`` ones are set.

    ``what`` names the component in messages (``"ordered-agg source"``). Unknown keys are refused
    with a did-you-mean suggestion (Spark lower-cases option keys).

    Raises
    ------
    ConfigError
        Unknown key (with a suggestion and the known names) or missing required key.
    """
    known = tuple(names)
    by_lower = {name.lower(): name for name in known}
    out: dict[str, str] = {}
    for key, value in options.items():
        name = by_lower.get(key.lower())
        if name is None:
            raise ConfigError(f"unknown option {key!r} for the {what}{did_you_mean(key, known)} "
                              f"Known options: {', '.join(known)}")
        out[name] = str(value)
    for name in required:
        if not out.get(name, "").strip():
            raise ConfigError(f"option {name} is required by the {what}; "
                              f"e.g. .option({name!r}, ...)")
    return out


def split_list(text: str | Iterable[str], sep: str = ",") -> tuple[str, ...]:
    """Split ``"a, f(b, c) as x"`` at top-level ``sep`` (a list is taken item by item).

    Items are stripped; empty items are dropped. Used for aggregates, key columns and paths
    (``,``) and for operators (``;``).
    """
    items = split_top_level(text, sep) if isinstance(text, str) else list(text)
    return tuple(i.strip() for i in items if i.strip())


def split_names(option: str, text: str | Iterable[str]) -> tuple[str, ...]:
    """Split a list of column names (backquotes allowed); ConfigError naming ``option``."""
    names = []
    for item in split_list(text):
        match = _IDENT.match(item)
        if match is None:
            raise ConfigError(f"option {option}={text!r}: {item!r} is not a column name")
        names.append(match.group(1))
    return tuple(names)


def one_name(option: str, text: str) -> str:
    """Exactly one column name; ConfigError naming ``option`` otherwise."""
    names = split_names(option, text)
    if len(names) != 1:
        raise ConfigError(f"option {option}={text!r} must name exactly one column")
    return names[0]


def query_required(required: Iterable[str], options: Mapping[str, object]) -> tuple[str, ...]:
    """``required`` without ``window`` and ``aggregates`` when ``operators`` are set.

    Operators may give the result themselves (rows, or sessions); whether the query then
    needs a window or aggregates is checked by the spec, with a message saying why.
    """
    has_operators = any(k.lower() == "operators" and str(v).strip() for k, v in options.items())
    optional = ("window", "aggregates") if has_operators else ()
    return tuple(r for r in required if r not in optional)
