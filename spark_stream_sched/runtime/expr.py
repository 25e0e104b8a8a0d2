"""A small, safe predicate language for ``count_where`` / ``first_where`` / ``last_where``.

Grammar (keywords are case-insensitive; never ``eval``)::

    expr       := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | predicate
    predicate  := "(" expr ")"
                | operand ("=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=") operand
                | operand "is" ["not"] "null"
                | operand ["not"] ("contains" | "rlike") STRING
                | operand                       -- a boolean column or literal
    operand    := COLUMN | `quoted column` | NUMBER | STRING | "true" | "false" | "null"

A chain of ``and`` (or ``or``) of any length is one node; parentheses and ``not`` may nest at
most :data:`MAX_NESTING` levels deep.

Semantics follow Spark SQL's three-valued logic: a comparison with null is null, ``and``/``or``
are Kleene, ``not null`` is null, and a predicate that ends up null counts as false.
``rlike`` uses RE2 syntax in the vectorised path (Arrow) and Python's ``re.search`` in the row
path (the reference); patterns are checked against both when the predicate is parsed, so a
pattern RE2 cannot run (a back-reference or a look-around) fails when the query is defined.

Two evaluators share one AST: :meth:`Predicate.evaluate` works on whole Arrow tables (the hot
path) and :meth:`Predicate.evaluate_row` on one row dict (the reference oracle).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_stream_sched.errors import ExpressionError, abbreviated

_TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
    r"|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<qid>`[^`]+`)|(?P<id>[A-Za-z_][A-Za-z_0-9.]*)|(?P<op><=|>=|==|!=|<>|[=<>()]))"
)
#: Most parentheses and ``not`` a predicate may nest (each level is a few Python frames when it
#: is parsed, checked and evaluated; 250 levels used to raise RecursionError).
MAX_NESTING = 100
_KEYWORDS = {"and", "or", "not", "is", "null", "contains", "rlike", "true", "false"}
_CMP: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "=": ("equal", operator.eq), "==": ("equal", operator.eq),
    "!=": ("not_equal", operator.ne), "<>": ("not_equal", operator.ne),
    "<": ("less", operator.lt), "<=": ("less_equal", operator.le),
    ">": ("greater", operator.gt), ">=": ("greater_equal", operator.ge),
}


@dataclass(frozen=True)
class Token:
    kind: str  # num | str | id | kw | op | end
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; raise ExpressionError at the first unknown character."""
    tokens: list[Token] = []
    pos, end = 0, len(text.rstrip())  # trailing blanks end the text (linear in its length)
    while pos < end:
        match = _TOKEN.match(text, pos)
        if not match:
            raise ExpressionError(
                f"cannot parse {abbreviated(text)} at position {pos}: {text[pos:pos + 10]!r}")
        kind = match.lastgroup or "op"
        value, start = match.group(kind), match.start(kind)
        if kind == "id" and value.lower() in _KEYWORDS:
            kind, value = "kw", value.lower()
        elif kind == "qid":
            kind, value = "id", value[1:-1]
        elif kind == "str":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        tokens.append(Token(kind, value, start))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


# ---- AST -------------------------------------------------------------------------------------

class Node:
    """Base of the expression AST."""

    def columns(self) -> set[str]:
        return set()


@dataclass(frozen=True)
class Column(Node):
    name: str

    def columns(self) -> set[str]:
        return {self.name}


@dataclass(frozen=True)
class Literal(Node):
    value: Any


@dataclass(frozen=True)
class Compare(Node):
    op: str
    left: Node
    right: Node

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()


@dataclass(frozen=True)
class Logical(Node):
    """``a and b and c`` (or ``or``) as one node: a chain of any length nests one level."""

    op: str  # "and" | "or"
    children: tuple[Node, ...]

    def columns(self) -> set[str]:
        return set().union(*(child.columns() for child in self.children))


@dataclass(frozen=True)
class Not(Node):
    child: Node

    def columns(self) -> set[str]:
        return self.child.columns()


@dataclass(frozen=True)
class IsNull(Node):
    child: Node
    negated: bool

    def columns(self) -> set[str]:
        return self.child.columns()


@dataclass(frozen=True)
class Match(Node):
    op: str  # "contains" | "rlike"
    child: Node
    pattern: str
    negated: bool

    def columns(self) -> set[str]:
        return self.child.columns()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0  # parentheses and 'not' open around the current token

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, what: str) -> ExpressionError:
        token = self.peek()
        found = token.text or "end of input"
        return ExpressionError(f"in predicate {abbreviated(self.text)} at position {token.pos}: "
                               f"expected {what}, found {found!r}")

    def accept_kw(self, word: str) -> bool:
        if self.peek().kind == "kw" and self.peek().text == word:
            self.i += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.or_expr()
        if self.peek().kind != "end":
            raise self.fail("'and', 'or' or the end")
        return node

    def or_expr(self) -> Node:
        children = [self.and_expr()]
        while self.accept_kw("or"):
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else Logical("or", tuple(children))

    def and_expr(self) -> Node:
        children = [self.not_expr()]
        while self.accept_kw("and"):
            children.append(self.not_expr())
        return children[0] if len(children) == 1 else Logical("and", tuple(children))

    def not_expr(self) -> Node:
        if self.accept_kw("not"):
            self.deeper()
            node = Not(self.not_expr())
            self.depth -= 1
            return node
        return self.predicate()

    def deeper(self) -> None:
        """Enter one more level of nesting (ExpressionError past :data:`MAX_NESTING`)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExpressionError(
                f"the predicate nests parentheses and 'not' more than {MAX_NESTING} levels "
                f"deep (at position {self.tokens[self.i - 1].pos} of its {len(self.text):,} "
                f"characters); at most {MAX_NESTING} are supported (a and b and c needs no "
                f"parentheses)")

    def predicate(self) -> Node:
        if self.peek().kind == "op" and self.peek().text == "(":
            self.next()
            self.deeper()
            node = self.or_expr()
            if self.next().text != ")":
                self.i -= 1
                raise self.fail("')'")
            self.depth -= 1
            return node
        left = self.operand()
        token = self.peek()
        if token.kind == "op" and token.text in _CMP:
            self.next()
            return Compare(token.text, left, self.operand())
        if self.accept_kw("is"):
            negated = self.accept_kw("not")
            if not self.accept_kw("null"):
                raise self.fail("'null'")
            return IsNull(left, negated)
        negated = self.accept_kw("not")
        for word in ("contains", "rlike"):
            if self.accept_kw(word):
                pattern = self.next()
                if pattern.kind != "str":
                    self.i -= 1
                    raise self.fail(f"a quoted string after {word!r}")
                if word == "rlike":
                    check_regex(pattern.text, self.text)
                return Match(word, left, pattern.text, negated)
        if negated:
            raise self.fail("'contains' or 'rlike' after 'not'")
        return left

    def operand(self) -> Node:
        token = self.next()
        if token.kind == "id":
            return Column(token.text)
        if token.kind == "num":
            is_float = any(c in token.text for c in ".eE")
            return Literal(float(token.text) if is_float else int(token.text))
        if token.kind == "str":
            return Literal(token.text)
        if token.kind == "kw" and token.text in ("true", "false", "null"):
            return Literal({"true": True, "false": False, "null": None}[token.text])
        self.i -= 1
        raise self.fail("a column name or a literal")


def check_regex(pattern: str, text: str) -> None:
    """Compile an ``rlike`` pattern with both engines that run it; ExpressionError if either fails.

    RE2 (through Arrow's ``match_substring_regex``) runs the vectorised path; it compiles the
    pattern only when there is a value to match, hence the one empty string. Python's ``re``
    runs the row path of the reference oracle.

    Raises
    ------
    ExpressionError
        Naming the predicate ``text``, the pattern and the engine's reason (RE2 has no
        back-references or look-arounds).
    """
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ExpressionError(
            f"predicate {abbreviated(text)}: bad regular expression {pattern!r}: RE2, the engine "
            f"rlike runs on, refuses it ({exc}); fix the pattern (RE2 has no back-references such "
            f"as \\1 and no look-arounds)") from exc
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ExpressionError(f"predicate {abbreviated(text)}: bad regular expression {pattern!r}: "
                              f"{exc}") from exc


def parse_predicate(text: str) -> Node:
    """Parse predicate ``text`` into an AST (ExpressionError on a syntax error)."""
    if not text.strip():
        raise ExpressionError("empty predicate")
    return _Parser(text).parse()
