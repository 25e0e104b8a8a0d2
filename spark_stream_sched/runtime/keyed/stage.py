"""Pipeline stages as users write them: ``delta(kwh) as d_kwh``, ``dedup(url, within=10 minutes)``.

A query's ``operators`` option (Spark), ``operators = [...]`` list (TOML ``[query]``) or repeated
``--op`` flags (CLI) is a sequence of stage texts, applied per key (the query's ``keyColumns``)
to the merged rows in the total order ``(ts, input, seq)``, before the optional window
aggregate. Grammar of one stage::

    stage   := name "(" [arg ("," arg)*] ")" [ "as" alias ]
    arg     := value | keyword "=" value        (values may be quoted with ' or ")
    keyword := "within" | "gap" | "budget"

:func:`parse_stage` checks only the syntax and the operator name; each operator checks its own
arguments when it is built (:func:`~spark_stream_sched.runtime.keyed.base.build_operator`), so a
wrong argument is refused at ``load()``/``start()`` naming the stage as written.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

from spark_stream_sched.errors import ConfigError, abbreviated
from spark_stream_sched.runtime.aggregates import split_top_level
from spark_stream_sched.runtime.names import did_you_mean
from spark_stream_sched.runtime.output_names import check_alias

_STAGE = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*\((.*)\)\s*"
                    r"(?:\s[Aa][Ss]\s+(`[^`]+`|[A-Za-z_][A-Za-z_0-9]*))?\s*$", re.DOTALL)
#: Keyword arguments operators take (anything else with ``=`` is a value, e.g. a predicate
#: ``where(kind = 'alarm')``).
KEYWORDS = ("within", "gap", "budget")
_KEYWORD = re.compile(r"^\s*(" + "|".join(KEYWORDS) + r")\s*=(?!=)\s*(.*)$",
                      re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class StageSpec:
    """One parsed stage: operator name, positional and keyword arguments, output alias.

    Values are kept as text (quotes removed); operators parse them (durations, columns,
    aggregates). :meth:`text` is the canonical form recorded in the query definition, so
    ``DELTA( kwh )`` and ``delta(kwh)`` are the same query.
    """

    name: str
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()
    alias: str | None = None

    def text(self) -> str:
        """Canonical text of the stage."""
        parts = [_quoted(a) for a in self.args] + [f"{k}={_quoted(v)}" for k, v in self.kwargs]
        alias = f" as {self.alias}" if self.alias else ""
        return f"{self.name}({', '.join(parts)}){alias}"

    def keyword(self, name: str, default: str | None = None) -> str | None:
        """Value of keyword argument ``name`` (or ``default``)."""
        return dict(self.kwargs).get(name, default)

    def fail(self, message: str) -> ConfigError:
        """A ConfigError naming this stage as written."""
        return ConfigError(f"operator {abbreviated(self.text())}: {message}")


#: Stage name -> operator class (filled by ``keyed.base.register``; classes typed loosely here
#: so that this module needs nothing of the operators).
REGISTRY: dict[str, Any] = {}
#: Modules of the built-in operators (each registers its classes when imported).
BUILTINS = ("rows", "running", "dedup", "sessions", "user", "join")


def operator_names() -> tuple[str, ...]:
    """Names of the registered operators (after importing the built-ins, once)."""
    for module in BUILTINS:
        importlib.import_module(f"spark_stream_sched.runtime.keyed.{module}")
    return tuple(sorted(REGISTRY))


def parse_stage(text: str) -> StageSpec:
    """Parse one stage text (syntax only; see the module docstring).

    Raises
    ------
    ConfigError
        Malformed text or an operator name that is not registered, with a suggestion.
    """
    match = _STAGE.match(text)
    if match is None:
        raise ConfigError(f"operator {abbreviated(text)} is not of the form name(arguments) "
                          f"[as alias], e.g. 'delta(kwh) as d_kwh'")
    name, body, alias = match.group(1).lower(), match.group(2), match.group(3)
    if name not in operator_names():
        raise ConfigError(f"operator {abbreviated(text)}: {name!r} is not an operator"
                          f"{did_you_mean(name, operator_names())} Operators: "
                          f"{', '.join(operator_names())}")
    args: list[str] = []
    kwargs: list[tuple[str, str]] = []
    stripped = body.strip()
    if re.search(r",\s*,", stripped) or stripped.startswith(",") or stripped.endswith(","):
        raise ConfigError(f"operator {abbreviated(text)} has an empty argument")
    for part in split_top_level(body):
        keyword = _KEYWORD.match(part)
        if keyword is not None and not part.strip().startswith(("'", '"')):
            if any(k == keyword.group(1) for k, _ in kwargs):
                raise ConfigError(f"operator {abbreviated(text)} sets {keyword.group(1)!r} twice")
            kwargs.append((keyword.group(1).lower(), _unquoted(keyword.group(2))))
        elif kwargs:
            raise ConfigError(f"operator {abbreviated(text)}: positional argument {part.strip()!r} "
                              f"after a keyword argument")
        else:
            args.append(_unquoted(part))
    if alias:
        check_alias(alias.strip("`"), f"operator {abbreviated(text)}")
    return StageSpec(name, tuple(args), tuple(kwargs), alias.strip("`") if alias else None)


def _unquoted(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _quoted(value: str) -> str:
    """A value as it must be written back so that it parses to the same value.

    Quoted only when it would not parse back alone: a top-level comma, a leading keyword,
    surrounding quotes or spaces, or nothing at all.
    """
    plain = (value and value == value.strip() and len(split_top_level(value)) == 1
             and not _KEYWORD.match(value) and _unquoted(value) == value)
    if plain:
        return value
    return "'" + value + "'" if "'" not in value else '"' + value + '"'
