"""A row's partition group as steps of small-integer arithmetic, for engines without uint64.

:func:`~.groups.group_of_rows` hashes a key with SplitMix64, which multiplies 64-bit unsigned
integers modulo ``2**64``. Spark SQL has only signed 64-bit integers, and with ANSI mode (the
default of Spark 4) an overflowing ``*`` or ``+`` fails the query. :func:`group_steps` writes
the same function as a sequence of named steps over non-negative integers that stay below
``2**62``: each 64-bit value is two 32-bit halves, a product is taken 16 bits at a time, and the
last step is the group (the hash modulo the number of groups). An engine evaluates the steps in
order, each step reading only the key columns and earlier steps' outputs, so no expression
grows with the number of steps (a tree that referred to its inputs twice per step would double
at every step). :func:`evaluate` runs the steps in NumPy; the tests check it against
:func:`~.groups.group_of_rows`, and :func:`sql_text` writes them as Spark SQL, which the Spark
adapter evaluates (``spark/sink.py`` ``partition_for_sink``, for sink states that group by
SplitMix64: those started before :mod:`~.murmur3`), so a row's group is computed by Spark's JVM
instead of in a Python worker.

Only key columns whose hash is an integer function of the value have steps: integers, booleans,
dates and timestamps (the value as an ``int64``: days, or the timestamp's unit). Floating and
text keys (whose hash reads the bits of a double, or xxh64 of UTF-8 bytes) have none: callers
keep computing those groups in Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Step", "evaluate", "group_steps", "sql_text", "step_levels"]

_MASK32 = (1 << 32) - 1
_MASK16 = (1 << 16) - 1
# the constants of runtime/keys.py (the tests compare the two functions on random keys)
_GOLDEN = 0x9E3779B97F4A7C15  # SplitMix64's increment; also the hash of a null key
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_SEED = 0x5851F42D4C957F2D
#: Every value a step produces is below this (checked by :func:`evaluate`), so below 2**63.
LIMIT = 1 << 62

#: An expression: ``("col", name)``, ``("lit", int)``, ``(op, left, right)`` with ``op`` one
#: of ``+ * % & | ^ >> << >>>`` (shifts by a literal; ``>>>`` shifts a signed 64-bit value as
#: unsigned), or ``("null", key, then, else)`` (``then`` where key column ``key`` is null).
Expr = tuple[Any, ...]


@dataclass(frozen=True)
class Step:
    """``name = expr``; ``expr`` reads key columns (by name) and earlier steps' names."""

    name: str
    expr: Expr


def group_steps(keys: Sequence[str], n_groups: int, prefix: str = "__g") -> list[Step]:
    """Steps computing :func:`~.groups.group_of_rows` for ``keys``; the last one is the group.

    The key columns must hold each key's value as a signed 64-bit integer (booleans as 0/1,
    dates as days, timestamps in their unit), null where the key is null. Step names start with
    ``prefix``; ``n_groups`` must be below ``2**31``.
    """
    if not 0 < n_groups < 1 << 31:
        raise ValueError(f"n_groups must be in 1 .. 2**31 - 1, got {n_groups}")
    build = _Builder(prefix)
    if not keys:
        return [Step(f"{prefix}group", ("lit", 0))]
    h = build.constant(_SEED)
    for index, name in enumerate(keys):
        value = build.split(name)
        mixed = build.splitmix(value)
        null = build.constant(_GOLDEN)
        column = build.pair(("null", name, ("col", null[0]), ("col", mixed[0])),
                            ("null", name, ("col", null[1]), ("col", mixed[1])), f"k{index}")
        h = build.splitmix(build.pair(("^", ("col", h[0]), ("col", column[0])),
                                      ("^", ("col", h[1]), ("col", column[1])), "x"))
    hi, lo = ("col", h[0]), ("col", h[1])
    build.add(f"{prefix}group", ("%", ("+", ("*", ("%", hi, ("lit", n_groups)),
                                                  ("lit", (1 << 32) % n_groups)),
                                           ("%", lo, ("lit", n_groups))), ("lit", n_groups)))
    return build.steps


class _Builder:
    """Appends steps; a 64-bit value is a pair of step names ``(high 32 bits, low 32 bits)``."""

    def __init__(self, prefix: str) -> None:
        self.prefix, self._count = prefix, 0
        self.steps: list[Step] = []

    def add(self, name: str, expr: Expr) -> str:
        self.steps.append(Step(name, expr))
        return name

    def fresh(self, expr: Expr, tag: str) -> str:
        """A step with a new name."""
        self._count += 1
        return self.add(f"{self.prefix}{self._count}{tag}", expr)

    def pair(self, hi: Expr, lo: Expr, tag: str) -> tuple[str, str]:
        return self.fresh(hi, tag + "h"), self.fresh(lo, tag + "l")

    def constant(self, value: int) -> tuple[str, str]:
        return self.pair(("lit", value >> 32), ("lit", value & _MASK32), "c")

    def split(self, key: str) -> tuple[str, str]:
        """A signed 64-bit key as its two's-complement halves (a null key as 0)."""
        column = ("null", key, ("lit", 0), ("col", key))
        return self.pair((">>>", column, ("lit", 32)), ("&", column, ("lit", _MASK32)), "v")

    def splitmix(self, x: tuple[str, str]) -> tuple[str, str]:
        """SplitMix64's finaliser of ``x + golden``, as in :func:`~..keys.stable_key_hash`."""
        z = self.add_constant(x, _GOLDEN)
        z = self.multiply(self.xor_shift(z, 30), _MIX1)
        z = self.multiply(self.xor_shift(z, 27), _MIX2)
        return self.xor_shift(z, 31)

    def add_constant(self, x: tuple[str, str], value: int) -> tuple[str, str]:
        """``x + value`` modulo ``2**64``."""
        low = self.fresh(("+", ("col", x[1]), ("lit", value & _MASK32)), "s")
        carry = (">>", ("col", low), ("lit", 32))
        return self.pair(("&", ("+", ("+", ("col", x[0]), ("lit", value >> 32)), carry),
                          ("lit", _MASK32)), ("&", ("col", low), ("lit", _MASK32)), "a")

    def xor_shift(self, x: tuple[str, str], k: int) -> tuple[str, str]:
        """``x ^ (x >> k)`` for ``0 < k < 32``."""
        hi, lo = ("col", x[0]), ("col", x[1])
        shifted = ("|", (">>", lo, ("lit", k)), ("&", ("<<", hi, ("lit", 32 - k)),
                                                 ("lit", _MASK32)))
        return self.pair(("^", hi, (">>", hi, ("lit", k))), ("^", lo, shifted), "x")

    def multiply(self, x: tuple[str, str], value: int) -> tuple[str, str]:
        """``x * value`` modulo ``2**64`` from products of 16-bit and 32-bit pieces (< 2**48).

        With ``x = hi * 2**32 + lo`` and ``value = c_hi * 2**32 + c_lo``, the result is
        ``lo * c_lo + (hi * c_lo + lo * c_hi) * 2**32``; ``lo * c_lo = p0 + p1 * 2**16``.
        """
        hi, lo = ("col", x[0]), ("col", x[1])
        c_hi, c_lo = ("lit", value >> 32), ("lit", value & _MASK32)
        lo0, lo1 = ("&", lo, ("lit", _MASK16)), (">>", lo, ("lit", 16))
        hi0, hi1 = ("&", hi, ("lit", _MASK16)), (">>", hi, ("lit", 16))
        p0 = self.fresh(("*", lo0, c_lo), "p")
        p1 = self.fresh(("*", lo1, c_lo), "p")
        low = self.fresh(("+", ("col", p0), ("<<", ("&", ("col", p1), ("lit", _MASK16)),
                                             ("lit", 16))), "q")
        carry = ("+", (">>", ("col", low), ("lit", 32)), (">>", ("col", p1), ("lit", 16)))
        high = ("+", carry, ("+", _low32_product(hi0, hi1, c_lo),
                             _low32_product(lo0, lo1, c_hi)))
        return self.pair(("&", high, ("lit", _MASK32)), ("&", ("col", low), ("lit", _MASK32)),
                         "m")


def _low32_product(a0: Expr, a1: Expr, c: Expr) -> Expr:
    """``((a1 * 2**16 + a0) * c) mod 2**32`` for 16-bit ``a0``, ``a1`` and 32-bit ``c``."""
    return ("&", ("+", ("*", a0, c), ("<<", ("&", ("*", a1, c), ("lit", _MASK16)),
                                      ("lit", 16))), ("lit", _MASK32))


def step_levels(steps: Sequence[Step]) -> list[list[Step]]:
    """``steps`` by level: a step's level is one above the highest level of the steps it reads.

    Steps of one level read only key columns and lower levels, so an engine can evaluate a
    level as one projection.
    """
    level: dict[str, int] = {}
    for step in steps:
        level[step.name] = 1 + max([level.get(n, 0) for n in _reads(step.expr)], default=0)
    return [[s for s in steps if level[s.name] == depth] for depth in sorted(set(level.values()))]


def _reads(expr: Expr) -> list[str]:
    """Names an expression reads (key columns and steps)."""
    if expr[0] == "col":
        return [expr[1]]
    return [n for part in expr[1:] if isinstance(part, tuple) for n in _reads(part)]


_SQL_SHIFTS = {">>": "shiftright", "<<": "shiftleft", ">>>": "shiftrightunsigned"}


def sql_text(expr: Expr) -> str:
    """``expr`` as Spark SQL text: ``bigint`` literals, Spark's shift functions, ``CASE`` for nulls.

    Column names are written as they are: key columns must have plain names (the sink names
    them ``__ordered_agg_key<i>``).
    """
    kind = expr[0]
    if kind == "col":
        return str(expr[1])
    if kind == "lit":
        return f"{expr[1]}L"
    if kind == "null":
        return f"CASE WHEN {expr[1]} IS NULL THEN {sql_text(expr[2])} ELSE {sql_text(expr[3])} END"
    if kind in _SQL_SHIFTS:
        return f"{_SQL_SHIFTS[kind]}({sql_text(expr[1])}, {expr[2][1]})"
    return f"({sql_text(expr[1])} {kind} {sql_text(expr[2])})"


def evaluate(steps: Sequence[Step], keys: Mapping[str, np.ndarray],
             nulls: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The last step's values for key columns ``keys`` (int64 arrays; ``nulls``: masks).

    Integers are Python's (no wrap-around), so a step that would overflow a signed 64-bit
    integer is caught: every value must stay in ``0 .. LIMIT - 1`` (raises ``ValueError``).
    """
    rows = len(next(iter(keys.values()))) if keys else 1
    env: dict[str, np.ndarray] = {k: np.asarray(v, np.int64).astype(object)
                                  for k, v in keys.items()}
    masks = {k: np.zeros(rows, bool) for k in keys} | dict(nulls or {})
    for step in steps:
        value = _eval(step.expr, env, masks, rows)
        if step.name not in keys and (np.any(value < 0) or np.any(value >= LIMIT)):
            raise ValueError(f"step {step.name} leaves 0 .. 2**62 - 1")
        env[step.name] = value
    return np.asarray(env[steps[-1].name], np.int64)


def _eval(expr: Expr, env: Mapping[str, np.ndarray], masks: Mapping[str, np.ndarray],
          rows: int) -> np.ndarray:
    kind = expr[0]
    if kind == "col":
        column: np.ndarray = env[expr[1]]
        return column
    if kind == "lit":
        return np.full(rows, expr[1], object)
    if kind == "null":
        then, other = (_eval(e, env, masks, rows) for e in expr[2:])
        return np.where(masks[expr[1]], then, other)
    a, b = (_eval(e, env, masks, rows) for e in expr[1:])
    operations = {">>>": lambda: (a % (1 << 64)) >> b,  # unsigned shift of a signed value
                  "+": lambda: a + b, "*": lambda: a * b, "%": lambda: a % b,
                  "&": lambda: a & b, "|": lambda: a | b, "^": lambda: a ^ b,
                  ">>": lambda: a >> b, "<<": lambda: a << b}
    result: np.ndarray = operations[kind]()
    return result
