"""Names and number of a query's result columns: what every door can write and Spark can read.

Three rules, checked when the query is defined:

* **reserved names**: names starting with ``__`` are the runtime's own columns (``__input``,
  ``__seq``, ``__pane``, ...), which the doors drop from results; an alias may not start so
  (:func:`check_alias`);
* **case**: Spark resolves column names without regard to case (``spark.sql.caseSensitive`` is
  false by default), so two result columns equal up to case (``N`` and ``n``, or an alias
  ``Meter`` beside the key ``meter``) would be written and then refused on reading with
  ``COLUMN_ALREADY_EXISTS`` (:func:`case_clashes`, :func:`check_output_names`);
* **limits**: at most :data:`MAX_AGGREGATES` aggregates and :data:`MAX_OUTPUT_COLUMNS` result
  columns, far above real queries and far below what exhausts a driver (60,000 aggregates, a
  1 MB option, exhausted the default driver heap and left the session dead).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spark_stream_sched.errors import ConfigError

RESERVED_PREFIX = "__"
#: Most aggregates one query may define.
MAX_AGGREGATES = 1000
#: Most result columns one query may return (window bounds, keys, aggregates, row columns).
MAX_OUTPUT_COLUMNS = 4096


def check_alias(alias: str, where: str) -> None:
    """ConfigError when ``alias`` is reserved; ``where`` names it (``aggregate '...'``)."""
    if alias.startswith(RESERVED_PREFIX):
        raise ConfigError(f"{where}: alias {alias!r} starts with {RESERVED_PREFIX!r}, which is "
                          f"reserved for the runtime's own columns (__input, __seq); choose "
                          f"another alias")


def case_clashes(names: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs ``(first, later)`` of ``names`` that are equal up to case (each later one once)."""
    first: dict[str, str] = {}
    pairs = []
    for name in names:
        key = name.casefold()
        if key in first:
            pairs.append((first[key], name))
        else:
            first[key] = name
    return pairs


def clash_message(pairs: Sequence[tuple[str, str]], what: str, plural: str) -> str:
    """The message for the first of :func:`case_clashes` ``pairs`` of ``what`` (``plural``)."""
    first, later = pairs[0]
    more = f" ({len(pairs) - 1:,} more such pairs)" if len(pairs) > 1 else ""
    if first == later:
        return f"{what} {first!r} is used twice{more}; rename one"
    return (f"{plural} {first!r} and {later!r} are equal up to case{more}; Spark resolves column "
            f"names without case, so it could not read the results (COLUMN_ALREADY_EXISTS); "
            f"rename one")


def check_output_names(names: Sequence[str]) -> None:
    """ConfigError unless the result columns ``names`` are few enough and differ up to case."""
    if len(names) > MAX_OUTPUT_COLUMNS:
        raise ConfigError(f"the query returns {len(names):,} columns; at most "
                          f"{MAX_OUTPUT_COLUMNS:,} are supported (fewer aggregates, or select "
                          f"fewer input columns)")
    pairs = case_clashes(names)
    if pairs:
        raise ConfigError(clash_message(pairs, "result column", "result columns"))
