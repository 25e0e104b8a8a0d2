"""Aggregate specifications: parsing ``"first(value) as first_v"`` and typing the results.

Order-insensitive: ``count(*)``, ``count(col)``, ``sum``, ``avg``, ``min``, ``max``,
``count_where(pred)``. Order-sensitive over the total order ``(ts, input, seq)``: ``first``,
``last``, ``first_where(col, pred)``, ``last_where(col, pred)`` (Gulisano et al. 2016, §2
distinguishes the two families; Table 2's queries use both), and ``max_by(col, ord)`` /
``min_by(col, ord)`` (Spark SQL's names): the value of ``col`` on the row with the largest
(smallest) ``ord``, the earliest such row in the total order when several tie. Null handling is
Spark SQL's: ``count(col)``, ``sum``, ``avg``, ``min`` and ``max`` skip nulls; ``first``/``last``
return the first/last value even when it is null; ``max_by``/``min_by`` skip rows whose ``ord`` is
null and return the chosen row's value even when it is null; a predicate that is null counts as
false. Orders compare as Spark's do: ``-0.0`` equals ``0.0`` and NaN is above every number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from spark_stream_sched.errors import ExpressionError, abbreviated
from spark_stream_sched.runtime.expr import parse_predicate
from spark_stream_sched.runtime.output_names import (
    MAX_AGGREGATES,
    case_clashes,
    check_alias,
    clash_message,
)
from spark_stream_sched.runtime.predicate import Predicate

#: function name -> (takes a column, takes a predicate)
FUNCTIONS: dict[str, tuple[bool, bool]] = {
    "count": (True, False), "sum": (True, False), "avg": (True, False),
    "min": (True, False), "max": (True, False), "count_where": (False, True),
    "first": (True, False), "last": (True, False),
    "first_where": (True, True), "last_where": (True, True),
    "max_by": (True, False), "min_by": (True, False),
}
#: Aggregates that take a value column and an ordering column: ``max_by(col, ord)``.
BY_ORDER = ("max_by", "min_by")


def signatures() -> list[str]:
    """Every aggregate function as it is called, e.g. ``first_where(col, pred)``."""
    def args(func: str, takes_col: bool, takes_pred: bool) -> str:
        if func in BY_ORDER:
            return "col, ord"
        return ", ".join(name for name, used in (("col", takes_col), ("pred", takes_pred)) if used)
    return ["count(*)", *(f"{func}({args(func, *shape)})" for func, shape in FUNCTIONS.items())]

_ALIAS = re.compile(r"^\s*as\s+(`[^`]+`|[A-Za-z_][A-Za-z_0-9]*)\s*$", re.IGNORECASE)
_NAME = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*)\s*\(")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` characters outside parentheses and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _closing_paren(text: str, open_at: int) -> int:
    depth, quote = 0, ""
    for i in range(open_at, len(text)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ExpressionError(f"aggregate {abbreviated(text)}: unbalanced parentheses")


@dataclass(frozen=True)
class AggSpec:
    """One aggregate: ``func(column[, predicate]) as alias``. ``column`` is ``"*"`` for count(*).

    ``order`` is the ordering column of ``max_by``/``min_by`` (None for every other function).
    """

    func: str
    column: str | None
    predicate: str | None
    alias: str
    order: str | None = None

    def text(self) -> str:
        """Canonical text that :func:`parse_aggregate` parses back into this spec."""
        args = [a for a in (self.column, self.order, self.predicate) if a is not None]
        alias = self.alias if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", self.alias) else (
            f"`{self.alias}`")
        return f"{self.func}({', '.join(args)}) as {alias}"


def parse_aggregate(text: str) -> AggSpec:
    """Parse one aggregate expression such as ``"first_where(v, kind = 'alarm') as fa"``."""
    match = _NAME.match(text)
    if not match:
        raise ExpressionError(f"aggregate {abbreviated(text)}: expected 'function(args) as alias'")
    func = match.group(1).lower()
    if func not in FUNCTIONS:
        raise ExpressionError(f"aggregate {abbreviated(text)}: unknown function {func!r}; "
                              f"known: {', '.join(sorted(FUNCTIONS))}")
    close = _closing_paren(text, match.end() - 1)
    inner, rest = text[match.end():close].strip(), text[close + 1:]
    alias_match = _ALIAS.match(rest) if rest.strip() else None
    if rest.strip() and not alias_match:
        raise ExpressionError(f"aggregate {abbreviated(text)}: expected 'as alias' after the call, "
                              f"found {rest.strip()!r}")
    takes_col, takes_pred = FUNCTIONS[func]
    column = predicate = order = None
    if func in BY_ORDER:
        column, order = _by_order_columns(text, func, inner)
    elif takes_col and takes_pred:
        args = split_top_level(inner)
        if len(args) < 2:
            raise ExpressionError(f"aggregate {abbreviated(text)}: {func} needs "
                                  f"(column, predicate)")
        column, predicate = args[0], inner.split(",", 1)[1].strip()
    elif takes_pred:
        predicate = inner
    else:
        column = inner
    if column is not None:
        column = column.strip("`")
        if not column or (column == "*" and func != "count"):
            raise ExpressionError(f"aggregate {abbreviated(text)}: {func} needs a column name")
    if takes_pred and not predicate:
        raise ExpressionError(f"aggregate {abbreviated(text)}: {func} needs a predicate")
    if predicate:
        _check_predicate_syntax(text, predicate)
    default_alias = f"{func}({inner.replace('`', '')})"  # Spark's name: sum(`v`) is sum(v)
    alias = alias_match.group(1).strip("`") if alias_match else default_alias
    check_alias(alias, f"aggregate {abbreviated(text)}")
    return AggSpec(func, column, predicate, alias, order)


def _by_order_columns(text: str, func: str, inner: str) -> tuple[str, str]:
    """The value and ordering column names of ``max_by(col, ord)`` / ``min_by(col, ord)``."""
    args = [a.strip("`") for a in split_top_level(inner)]
    if len(args) != 2 or not all(re.fullmatch(r"[^()`,]+", a) for a in args):
        raise ExpressionError(f"aggregate {abbreviated(text)}: {func} needs two column names, "
                              f"(value column, ordering column), e.g. {func}(price, ts)")
    return args[0], args[1]


def _check_predicate_syntax(text: str, predicate: str) -> None:
    """Parse the predicate now (syntax, rlike patterns), so a bad one fails at definition.

    Column names and types are checked later, by :func:`bind`, once the schema is known.
    """
    try:
        parse_predicate(predicate)
    except ExpressionError as exc:
        raise ExpressionError(f"aggregate {abbreviated(text)}: {exc}") from exc


def check_aggregate_count(n: int) -> None:
    """ExpressionError when ``n`` aggregates are more than :data:`~.output_names.MAX_AGGREGATES`."""
    if n > MAX_AGGREGATES:
        raise ExpressionError(f"{n:,} aggregates given; at most {MAX_AGGREGATES:,} are "
                              f"supported per query")


def parse_aggregates(items: str | Iterable[str]) -> list[AggSpec]:
    """Parse a comma-separated string or a list of aggregate expressions.

    At most :data:`~.output_names.MAX_AGGREGATES` (counted before any is parsed); aliases must
    differ up to case (:mod:`~.output_names`).
    """
    texts = split_top_level(items) if isinstance(items, str) else list(items)
    if not texts:
        raise ExpressionError("no aggregates given; e.g. 'count(*) as n'")
    check_aggregate_count(len(texts))
    specs = [parse_aggregate(t) for t in texts]
    pairs = case_clashes(spec.alias for spec in specs)
    if pairs:
        raise ExpressionError(clash_message(pairs, "aggregate alias", "aggregate aliases"))
    return specs


@dataclass(frozen=True)
class BoundAggregate:
    """An :class:`AggSpec` checked against an input schema, with its result type."""

    spec: AggSpec
    input_type: pa.DataType | None
    predicate: Predicate | None
    output_type: pa.DataType
    order_type: pa.DataType | None = None


def read_columns(aggs: Iterable[BoundAggregate]) -> list[str]:
    """The input columns ``aggs`` read (values, orders, predicates' columns), each once."""
    names: list[str] = []
    for agg in aggs:
        names += [c for c in (agg.spec.column, agg.spec.order) if c not in (None, "*")]
        if agg.predicate is not None:
            names.extend(sorted(agg.predicate.columns))
    return list(dict.fromkeys(names))


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def orderable(t: pa.DataType) -> bool:
    """True for the types ``max_by``/``min_by`` order by (numbers, strings, times, booleans)."""
    return bool(_numeric(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_binary(t) or pa.types.is_temporal(t) or pa.types.is_boolean(t)
                or pa.types.is_decimal(t))


def _check_order_column(spec: AggSpec, schema: pa.Schema) -> None:
    if spec.order not in schema.names:
        raise ExpressionError(f"aggregate {spec.text()!r} orders by unknown column "
                              f"{spec.order!r}; columns are {schema.names}")
    kind = schema.field(spec.order).type
    if not orderable(kind):
        raise ExpressionError(f"aggregate {spec.text()!r}: {spec.func} cannot order by "
                              f"{spec.order!r} of type {kind}; order by a number, string, "
                              f"boolean, date or timestamp column")


def bind(spec: AggSpec, schema: pa.Schema) -> BoundAggregate:
    """Check ``spec`` against ``schema`` and derive its output type (Spark's typing rules)."""
    input_type = None
    if spec.column not in (None, "*"):
        if spec.column not in schema.names:
            raise ExpressionError(f"aggregate {spec.text()!r} uses unknown column "
                                  f"{spec.column!r}; columns are {schema.names}")
        input_type = schema.field(spec.column).type
    predicate = Predicate.compile(spec.predicate, schema) if spec.predicate else None
    func = spec.func
    if spec.order is not None:
        _check_order_column(spec, schema)
    if func in ("sum", "avg") and not (input_type is not None and _numeric(input_type)):
        raise ExpressionError(f"aggregate {spec.text()!r}: {func} needs a numeric column, "
                              f"{spec.column!r} is {input_type}")
    if func in ("count", "count_where"):
        output: pa.DataType = pa.int64()
    elif func == "avg":
        output = pa.float64()
    elif func == "sum":
        assert input_type is not None
        output = pa.int64() if pa.types.is_integer(input_type) else pa.float64()
    else:
        assert input_type is not None
        output = input_type
    order_type = schema.field(spec.order).type if spec.order is not None else None
    return BoundAggregate(spec, input_type, predicate, output, order_type)
