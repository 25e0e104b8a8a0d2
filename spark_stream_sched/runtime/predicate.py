"""Compiled predicates: type-checked against a schema, evaluated on tables or single rows.

See :mod:`.expr` for the grammar and the null semantics (Spark SQL three-valued logic; a null
outcome counts as false).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ExpressionError, abbreviated
from spark_stream_sched.runtime.expr import (
    _CMP,
    Column,
    Compare,
    IsNull,
    Literal,
    Logical,
    Match,
    Node,
    Not,
    check_regex,
    parse_predicate,
)


def _kind(node: Node, schema: pa.Schema) -> str:
    """Coarse type of an operand: number | string | bool | null | other."""
    if isinstance(node, Literal):
        value = node.value
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "bool"
        return "number" if isinstance(value, int | float) else "string"
    if isinstance(node, Column):
        t = schema.field(node.name).type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return "number"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "string"
        if pa.types.is_boolean(t):
            return "bool"
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            return "number"
        return "other"
    return "bool"


def _check(node: Node, schema: pa.Schema, text: str, as_predicate: bool = True) -> None:
    for name in sorted(node.columns()):
        if name not in schema.names:
            raise ExpressionError(f"predicate {abbreviated(text)} uses unknown column {name!r}; "
                                  f"columns are {schema.names}")
    if isinstance(node, Compare):
        left, right = _kind(node.left, schema), _kind(node.right, schema)
        if "null" not in (left, right) and left != right:
            raise ExpressionError(f"predicate {abbreviated(text)} compares a {left} with a {right}")
    elif isinstance(node, Match):
        if _kind(node.child, schema) != "string":
            raise ExpressionError(f"predicate {abbreviated(text)}: {node.op} needs a string column")
        if node.op == "rlike":
            check_regex(node.pattern, text)
    elif as_predicate and isinstance(node, Column) and _kind(node, schema) != "bool":
        raise ExpressionError(f"predicate {abbreviated(text)}: column {node.name!r} is not "
                              f"boolean; compare it with a value")
    for child in _children(node):
        _check(child, schema, text, isinstance(node, Logical | Not))


def _children(node: Node) -> list[Node]:
    if isinstance(node, Logical):
        return list(node.children)
    if isinstance(node, Compare):
        return [node.left, node.right]
    if isinstance(node, Not | IsNull | Match):
        return [node.child]
    return []


def _eval(node: Node, table: pa.Table) -> Any:
    if isinstance(node, Column):
        return table.column(node.name)
    if isinstance(node, Literal):
        return pa.scalar(node.value)
    if isinstance(node, Compare):
        return getattr(pc, _CMP[node.op][0])(_eval(node.left, table), _eval(node.right, table))
    if isinstance(node, Logical):
        fn = pc.and_kleene if node.op == "and" else pc.or_kleene
        return functools.reduce(fn, (_eval(child, table) for child in node.children))
    if isinstance(node, Not):
        return pc.invert(_eval(node.child, table))
    if isinstance(node, IsNull):
        result = pc.is_null(_eval(node.child, table))
        return pc.invert(result) if node.negated else result
    assert isinstance(node, Match)
    child = _eval(node.child, table)
    if node.op == "contains":
        result = pc.match_substring(child, node.pattern)
    else:
        result = pc.match_substring_regex(child, node.pattern)
    return pc.invert(result) if node.negated else result


def _eval_row(node: Node, row: dict[str, Any]) -> Any:  # noqa: C901 - a flat dispatch
    if isinstance(node, Column):
        return row[node.name]
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Compare):
        left, right = _eval_row(node.left, row), _eval_row(node.right, row)
        if left is None or right is None:
            return None
        return bool(_CMP[node.op][1](left, right))
    if isinstance(node, Logical):  # Kleene: a deciding value wins, else null if any is null
        values = [_eval_row(child, row) for child in node.children]
        decisive = node.op == "or"
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(node, Not):
        value = _eval_row(node.child, row)
        return None if value is None else not value
    if isinstance(node, IsNull):
        return (_eval_row(node.child, row) is None) != node.negated
    assert isinstance(node, Match)
    text = _eval_row(node.child, row)
    if text is None:
        return None
    value = str(text)
    found = node.pattern in value if node.op == "contains" else bool(re.search(node.pattern, value))
    return found != node.negated


@dataclass(frozen=True)
class Predicate:
    """A parsed predicate checked against a schema.

    Use :meth:`compile`; then :meth:`evaluate` (vectorised, returns a NumPy bool mask where
    null counts as false) or :meth:`evaluate_row` (one row as a dict).
    """

    text: str
    node: Node

    @classmethod
    def compile(cls, text: str, schema: pa.Schema) -> Predicate:
        """Parse ``text`` and type-check it against ``schema`` (ExpressionError if wrong)."""
        node = parse_predicate(text)
        _check(node, schema, text)
        return cls(text, node)

    @property
    def columns(self) -> set[str]:
        """Columns the predicate reads."""
        return self.node.columns()

    def evaluate(self, table: pa.Table) -> np.ndarray:
        """Evaluate on every row of ``table``; null outcomes are False."""
        result = _eval(self.node, table)
        if isinstance(result, pa.Scalar):
            value = bool(result.as_py()) if result.is_valid else False
            return np.full(table.num_rows, value, dtype=bool)
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        return np.asarray(result.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)

    def evaluate_row(self, row: dict[str, Any]) -> bool:
        """Evaluate on one row (a dict of column values); null counts as False."""
        return _eval_row(self.node, row) is True
