"""Exactly rounded floating sums: an exact, mergeable accumulator for many groups at once.

The rule (``docs/aggregates.md``): a floating ``sum`` is the double nearest (ties to even) to the
exact real sum of its non-null values, as :func:`math.fsum` computes it. Any NaN gives NaN, both
infinities give NaN, one infinity gives itself, an exact sum beyond the largest double rounds to
``±inf`` (IEEE round to nearest) and an exact zero is ``+0.0``.

Representation. A finite double is an integer multiple of ``2**-1074``, and so is any sum of
doubles; that grid is cut into 32-bit *limbs* (:mod:`.exact_digits` puts values on it). An
:class:`ExactSums` holds a ``[limb, group]`` int64 matrix of digits over only the limbs its data
touches (``low`` is the first), plus NaN / ``+inf`` / ``-inf`` flags per group. Merging partials
is integer addition, associative and commutative: partials combined in any grouping and order
give the same bits. Carries are propagated after every operation (each limb but the top one then
lies in ``[0, 2**32)``), and a limb of headroom keeps the signed top one small.

Rounding is vectorised and needs no fallback: the top 64 bits of the magnitude with a sticky
bit are rounded half to even by the uint64 to float64 conversion, and a sum below ``2**-1021``
is exact (it has at most 53 bits on the ``2**-1074`` grid), so subnormal results need no care.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from spark_stream_sched.runtime import exact_digits
from spark_stream_sched.runtime.exact_digits import NAN, NEG_INF, POS_INF, carry

__all__ = ["NAN", "NEG_INF", "POS_INF", "ExactSums", "concat", "running_sums"]

#: Most sums :meth:`ExactSums.merge` adds into one group with float64 ``np.bincount``: limbs
#: below ``2**32``, so partial sums stay below ``2**53``.
MERGE_BY_BINCOUNT = 1 << 21


@dataclass(frozen=True)
class ExactSums:
    """Exact partial sums of ``groups`` groups (see the module docstring).

    Attributes
    ----------
    low
        Absolute index of the first limb (limb ``low + j`` weighs ``2**(32*(low + j) - 1074)``).
    limbs
        ``[n_limbs, groups]`` int64 digits with carries propagated: every limb but the top one
        in ``[0, 2**32)``, the top one signed and small (its sign is the sum's).
    special
        ``[groups]`` uint8: :data:`NAN`, :data:`POS_INF`, :data:`NEG_INF` seen.
    """

    low: int
    limbs: np.ndarray
    special: np.ndarray

    @property
    def groups(self) -> int:
        """Number of groups."""
        return int(self.special.shape[0])

    @classmethod
    def zeros(cls, groups: int) -> ExactSums:
        """``groups`` empty sums."""
        return cls(0, np.zeros((1, groups), np.int64), np.zeros(groups, np.uint8))

    @classmethod
    def of_digits(cls, low: int, limbs: np.ndarray, special: np.ndarray) -> ExactSums:
        """Sums from signed int64 digits (``|digit| < 2**62``) of a fresh array, carried here."""
        return cls(low, carry(limbs), special)

    @classmethod
    def of_values(cls, values: np.ndarray, group: np.ndarray, groups: int) -> ExactSums:
        """Sum float64 ``values`` per ``group`` (ints in ``[0, groups)``); nulls already removed."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        group = np.asarray(group, dtype=np.int64)
        block = exact_digits.BLOCK
        parts = [cls(*exact_digits.accumulate(values[s:s + block], group[s:s + block], groups))
                 for s in range(0, max(len(values), 1), block)]
        return parts[0] if len(parts) == 1 else concat(parts).merge(
            np.tile(np.arange(groups), len(parts)), groups)

    @classmethod
    def of_each(cls, values: np.ndarray) -> ExactSums:
        """One sum per float64 value (its exact partial): :meth:`of_values` without adding."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        block = exact_digits.BLOCK
        parts = [cls(*exact_digits.accumulate(values[s:s + block], None,
                                              len(values[s:s + block])))
                 for s in range(0, max(len(values), 1), block)]
        return parts[0] if len(parts) == 1 else concat(parts)

    # -- reshaping ---------------------------------------------------------------------------

    def aligned(self, low: int, n: int) -> np.ndarray:
        """The digits on limbs ``low .. low + n - 1`` (which must cover this object's limbs)."""
        out = np.zeros((n, self.groups), np.int64)
        out[self.low - low:self.low - low + len(self.limbs)] = self.limbs
        return out

    def take(self, index: np.ndarray) -> ExactSums:
        """The sums of groups ``index`` (in that order)."""
        return ExactSums(self.low, self.limbs[:, index], self.special[index])

    def trimmed(self) -> ExactSums:
        """The same sums on fewer limbs: no all-zero bottom limb, no redundant sign limb on top.

        A top limb of 0 (or -1) above a limb below ``2**31`` (or at least ``2**31``) only
        extends the sign, so it folds into the limb below, which becomes the signed top.
        """
        limbs, low = self.limbs, self.low
        while len(limbs) > 1 and not limbs[0].any():
            limbs, low = limbs[1:], low + 1
        while len(limbs) > 1:
            top, below = limbs[-1], limbs[-2]
            negative = top == -1
            if not np.all(negative == (below >= 1 << 31)) or np.any((top != 0) & ~negative):
                break
            limbs = limbs[:-1].copy()
            limbs[-1] = np.where(negative, below - (1 << 32), below)
        return ExactSums(low, limbs, self.special)

    def merge(self, group: np.ndarray, groups: int,
              rows: np.ndarray | None = None) -> ExactSums:
        """Add sum ``rows[i]`` (default ``i``) into group ``group[i]`` of ``groups`` new sums.

        Exact, in any order. With at most :data:`MERGE_BY_BINCOUNT` sums per group (windows
        merge a few panes) the limbs add up exactly in ``np.bincount``'s float64; else by
        blocks of ``np.add.at`` in int64.
        """
        group = np.asarray(group, dtype=np.int64)
        special = np.zeros(groups, np.uint8)
        if self.special.any():
            np.bitwise_or.at(special, group, self.special if rows is None else self.special[rows])
        few = np.bincount(group, minlength=groups).max(initial=0) <= MERGE_BY_BINCOUNT
        if not few or np.abs(self.limbs[-1]).max(initial=0) >= 1 << 32:
            picked = self if rows is None else self.take(rows)
            return ExactSums(self.low, picked._add_at(group, groups), special)
        out = np.zeros((len(self.limbs) + 1, groups), np.int64)
        for j, limb in enumerate(self.limbs):
            if limb.any():
                out[j] = np.bincount(group, weights=limb if rows is None else limb[rows],
                                     minlength=groups)
        return ExactSums(self.low, carry(out), special)

    def _add_at(self, group: np.ndarray, groups: int) -> np.ndarray:
        """Carried limbs of :meth:`merge` by int64 ``np.add.at``, a block of sums at a time."""
        n = len(self.limbs) + 1
        out = np.zeros(n * groups, np.int64)
        block = exact_digits.BLOCK
        for s in range(0, len(group), block):
            flat = (np.arange(n - 1)[:, None] * groups + group[None, s:s + block]).ravel()
            np.add.at(out, flat, self.limbs[:, s:s + block].ravel())
            carry(out.reshape(n, groups))
        return out.reshape(n, groups)

    def summed(self, total: Callable[[np.ndarray], np.ndarray]) -> ExactSums:
        """New sums, each adding a set of these sums (a window of panes, a prefix of rows).

        ``total`` maps one int64 value per sum to one total per new sum, and must add at most
        :data:`~.exact_digits.BLOCK` values into a total (int64 additions, exact); it is
        applied to every limb and, for the special values, to 0/1 indicators.
        """
        summed = [total(limb) if limb.any() else None for limb in self.limbs]  # 0 stays 0
        shape = next((t.shape for t in summed if t is not None), None)
        shape = total(self.limbs[0]).shape if shape is None else shape
        limbs = [np.zeros(shape, np.int64) if t is None else t for t in summed]
        limbs.append(np.zeros(shape, np.int64))  # headroom for the carries
        special = np.zeros(shape, np.uint8)
        for flag in (NAN, POS_INF, NEG_INF):
            hit = (self.special & flag) != 0
            if hit.any():
                special |= np.where(total(hit.astype(np.int64)) > 0, flag, 0).astype(np.uint8)
        return ExactSums(self.low, carry(np.stack(limbs)), special)

    # -- results -----------------------------------------------------------------------------

    def magnitudes(self) -> tuple[np.ndarray, np.ndarray]:
        """Digits of ``|sum|`` (each in ``[0, 2**32)``) and whether each sum is negative."""
        digits = self.limbs
        if np.any(np.abs(digits[-1]) >= 1 << 31):  # keep a limb of headroom for the carries
            top = digits[-1]  # split into a digit and its sign-extending limb (-1 or 0 above)
            digits = np.concatenate([digits[:-1], [top & 0xFFFFFFFF], [top >> 32]])
        negative = digits[-1] < 0
        if negative.any():
            digits = digits.copy()
            digits[:, negative] = carry(-digits[:, negative])
        return digits, negative

    def to_double(self) -> np.ndarray:
        """The exactly rounded double of every sum (see the module docstring for the rule)."""
        digits, negative = self.magnitudes()
        value = _round(digits.view(np.uint64), self.low)
        value = np.where(negative, -value, value)
        special = self.special
        if special.any():
            pos, neg = (special & POS_INF) != 0, (special & NEG_INF) != 0
            value = np.where(pos, np.inf, np.where(neg, -np.inf, value))
            value = np.where(((special & NAN) != 0) | (pos & neg), np.nan, value)
        return value


def concat(parts: Sequence[ExactSums]) -> ExactSums:
    """The groups of ``parts`` one after another, on one limb range.

    A part on fewer limbs has zero limbs above its signed top; the carries make its top limb
    the sign limb again (else a negative sum would read as a large positive one).
    """
    low = min(p.low for p in parts)
    n = max(p.low + len(p.limbs) for p in parts) - low
    return ExactSums.of_digits(low, np.concatenate([p.aligned(low, n) for p in parts], axis=1),
                               np.concatenate([p.special for p in parts]))


def extent(nonzero: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Highest and lowest non-zero limb of every column (``n - 1`` and 0 for a zero column).

    A loop over the few limbs: ``argmax`` along the limb axis is several times slower.
    """
    n, g = nonzero.shape
    highest, lowest = np.full(g, n - 1), np.zeros(g, np.int64)
    for j in range(n):
        np.copyto(highest, j, where=nonzero[j])
        np.copyto(lowest, n - 1 - j, where=nonzero[n - 1 - j])
    return highest, lowest


def _round(digits: np.ndarray, low: int) -> np.ndarray:
    """Nearest double (ties to even) to each column of uint64 ``digits`` (each below ``2**32``).

    ``t`` holds the 64 bits from the top set bit down (that bit at absolute grid position
    ``top``), and its bit 0 also records whether any lower bit is set (*sticky*). Converting
    ``t`` to float64 rounds it to 53 bits, half to even, at bit 11; the sticky bit, below the
    rounding bit, only breaks ties, so the rounding is that of the exact sum. ``np.ldexp`` then
    scales exactly (a sum below ``2**53`` grid units has no lower bits and lands exactly on the
    subnormal grid) or overflows to inf, as IEEE rounding does.
    """
    n, g = digits.shape
    nonzero = digits != 0
    h, lowest = extent(nonzero)
    flat, cols = digits.reshape(-1), np.arange(g)

    def limb(k: int) -> np.ndarray:
        """Digit ``h - k`` of every sum (0 below limb 0)."""
        below = h - k
        got: np.ndarray = np.where(below >= 0, flat[np.maximum(below, 0) * g + cols], 0)
        return got.astype(np.uint64)

    high, mid, rest = flat[h * g + cols], limb(1), limb(2)
    width = np.frexp(high.astype(np.float64))[1].astype(np.uint64)  # bit length, 0 for 0
    width = np.maximum(width, np.uint64(1))
    t = (high << (np.uint64(64) - width)) | (mid << (np.uint64(32) - width)) | (rest >> width)
    sticky = ((lowest < h - 2) & (high != 0)) | ((rest & ((np.uint64(1) << width) - 1)) != 0)
    top = 32 * (low + h) + width.astype(np.int64) - 1
    with np.errstate(over="ignore"):
        value: np.ndarray = np.ldexp((t | sticky).astype(np.float64), top - 63 - 1074)
    return value


def running_sums(values: np.ndarray, starts: np.ndarray,
                 base: ExactSums) -> tuple[np.ndarray, ExactSums]:
    """Exactly rounded prefix sums of ``values`` within segments, each seeded with a partial.

    Segment ``i`` is ``values[starts[i]:starts[i + 1]]`` (non-empty; fewer than
    :data:`~.exact_digits.BLOCK` values in all) and starts from sum ``i`` of ``base``. Returns
    the rounded sum after every value (in the order of ``values``) and the partial after each
    segment's last value. One cumulative sum per limb over all segments, minus each segment's
    offset plus its base (exact in int64, wrapping included), replaces a loop over keys.
    """
    sizes, first = np.diff(starts), starts[:-1]
    each = ExactSums.of_each(values)
    low = min(each.low, base.low)
    n = max(each.low + len(each.limbs), base.low + len(base.limbs)) + 1 - low
    own = each.aligned(low, n)
    total = np.cumsum(own, axis=1)
    offset = total[:, first] - own[:, first] - base.aligned(low, n)
    total -= np.repeat(offset, sizes, axis=1)
    special = np.zeros(len(values), np.uint8)
    if each.special.any() or base.special.any():
        for flag in (NAN, POS_INF, NEG_INF):
            hit = ((each.special & flag) != 0).astype(np.int64)
            seen = np.cumsum(hit)
            seen -= np.repeat(seen[first] - hit[first] - ((base.special & flag) != 0), sizes)
            special |= np.where(seen > 0, flag, 0).astype(np.uint8)
    after = ExactSums.of_digits(low, total, special)
    return after.to_double(), after.take(starts[1:] - 1).trimmed()
