"""Exactly rounded floating sums: an exact, mergeable accumulator for many groups at once.

The rule (``docs/aggregates.md``): a floating ``sum`` is the double nearest (ties to even) to the
exact real sum of its non-null values, as :func:`math.fsum` computes it. Any NaN gives NaN, both
infinities give NaN, one infinity gives itself, an exact sum beyond the largest double rounds to
``±inf`` (IEEE round to nearest) and an exact zero is ``+0.0``.

Representation. A finite double is an integer multiple of ``2**-1074``: ``x = ±m * 2**o *
2**-1074`` with ``m < 2**53`` and ``0 <= o <= 2045``, both read from its bits. That absolute grid
is cut into 32-bit *limbs* (limb ``j`` weighs ``2**(32*j - 1074)``). An :class:`ExactSums` holds
a ``[limb, group]`` int64 matrix of signed digits over only the limbs its data touches (``low``
is the first), plus NaN / ``+inf`` / ``-inf`` flags per group. Merging partials is integer
addition, associative and commutative: partials combined in any grouping and order give the
same bits. Carries are propagated after every operation (each limb but the top one then lies in
``[0, 2**32)``), and a limb of headroom keeps the signed top one small.

Accumulating values takes one of two paths, both exact:

* the grid (usual data: all values within ``37 * GRID_DIGITS`` bits of each other): scaled by a
  power of two, every value is an integer on one grid; it is cut into 37-bit digits with float64
  ``trunc`` and subtraction, and each digit is added per group with ``np.bincount``, exact while
  a partial stays below ``2**53`` (at most ``2**16`` digits per call): see :func:`_on_grid`;
* by value (wider spans): each value's ``m * 2**(o % 32)`` becomes three digits below ``2**33``
  on its own limbs, added with ``np.add.at`` in int64 (at most :data:`BLOCK` per call:
  ``2**29 * 2**33 < 2**63``).

Rounding is vectorised and needs no fallback: the top 64 bits of the magnitude plus a sticky bit
are rounded half to even at bit 11, and a sum below ``2**-1021`` is exact (it has at most 53
bits on the ``2**-1074`` grid), so subnormal results need no care either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Special-value flags of a group (bitwise or).
NAN, POS_INF, NEG_INF = 1, 2, 4
#: Most values one call adds into one cell before carries are propagated.
BLOCK = 1 << 29
_MASK = (1 << 32) - 1
_EXPONENT = 0x7FF << 52
_ABS = (1 << 63) - 1
#: Most 37-bit digits per value on the fast path (values spanning up to 111 bits).
GRID_DIGITS = 3
_DIGIT_BITS = 37
_GRID_BLOCK = 1 << 16
_FRACTION = (1 << 52) - 1


@dataclass(frozen=True)
class ExactSums:
    """Exact partial sums of ``groups`` groups (see the module docstring).

    Attributes
    ----------
    low
        Absolute index of the first limb (limb ``low + j`` weighs ``2**(32*(low + j) - 1074)``).
    limbs
        ``[n_limbs, groups]`` int64 digits: the top one signed and small, the others of
        magnitude below ``2**33``.
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
    def of_values(cls, values: np.ndarray, group: np.ndarray, groups: int) -> ExactSums:
        """Sum float64 ``values`` per ``group`` (ints in ``[0, groups)``); nulls already removed."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        group = np.asarray(group, dtype=np.int64)
        parts = [_accumulate(values[s:s + BLOCK], group[s:s + BLOCK], groups)
                 for s in range(0, max(len(values), 1), BLOCK)]
        return parts[0] if len(parts) == 1 else concat(parts).merge(
            np.tile(np.arange(groups), len(parts)), groups)

    # -- reshaping ---------------------------------------------------------------------------

    def aligned(self, low: int, n: int) -> np.ndarray:
        """The digits on limbs ``low .. low + n - 1`` (which must cover this object's limbs)."""
        out = np.zeros((n, self.groups), np.int64)
        out[self.low - low:self.low - low + len(self.limbs)] = self.limbs
        return out

    def take(self, index: np.ndarray) -> ExactSums:
        """The sums of groups ``index`` (in that order)."""
        return ExactSums(self.low, self.limbs[:, index], self.special[index])

    def merge(self, group: np.ndarray, groups: int) -> ExactSums:
        """Add sum ``i`` into group ``group[i]`` of ``groups`` new sums (exact; any order)."""
        group = np.asarray(group, dtype=np.int64)
        n = len(self.limbs) + 1
        out = np.zeros(n * groups, np.int64)
        for s in range(0, len(group), BLOCK):
            flat = (np.arange(n - 1)[:, None] * groups + group[None, s:s + BLOCK]).ravel()
            np.add.at(out, flat, self.limbs[:, s:s + BLOCK].ravel())
            out = _carry(out.reshape(n, groups)).ravel()
        special = np.zeros(groups, np.uint8)
        np.bitwise_or.at(special, group, self.special)
        return ExactSums(self.low, out.reshape(n, groups), special)

    def summed(self, total: Callable[[np.ndarray], np.ndarray]) -> ExactSums:
        """New sums, each adding a set of these sums (a window of panes, a prefix of rows).

        ``total`` maps one int64 value per sum to one total per new sum, and must add at most
        :data:`BLOCK` values into a total (int64 additions, exact); it is applied to every limb
        and, for the special values, to 0/1 indicators.
        """
        limbs = [total(limb) for limb in self.limbs]
        limbs.append(np.zeros_like(limbs[0]))  # headroom for the carries
        special = np.zeros(len(limbs[0]), np.uint8)
        for flag in (NAN, POS_INF, NEG_INF):
            hit = (self.special & flag) != 0
            if hit.any():
                special |= np.where(total(hit.astype(np.int64)) > 0, flag, 0).astype(np.uint8)
        return ExactSums(self.low, _carry(np.stack(limbs)), special)

    # -- results -----------------------------------------------------------------------------

    def magnitudes(self) -> tuple[np.ndarray, np.ndarray]:
        """Digits of ``|sum|`` (each in ``[0, 2**32)``) and whether each sum is negative."""
        limbs = self.limbs
        if np.any(np.abs(limbs[-1]) >= 1 << 31):  # keep a limb of headroom for the carries
            limbs = np.concatenate([limbs, np.zeros((1, self.groups), np.int64)])
        digits = _carry(limbs)
        negative = digits[-1] < 0
        if negative.any():
            digits[:, negative] = _carry(-digits[:, negative])
        return digits, negative

    def to_double(self) -> np.ndarray:
        """The exactly rounded double of every sum (see the module docstring for the rule)."""
        digits, negative = self.magnitudes()
        value = _round(digits.astype(np.uint64), self.low)
        value = np.where(negative, -value, value)
        special = self.special
        if special.any():
            pos, neg = (special & POS_INF) != 0, (special & NEG_INF) != 0
            value = np.where(pos, np.inf, np.where(neg, -np.inf, value))
            value = np.where(((special & NAN) != 0) | (pos & neg), np.nan, value)
        return value


def concat(parts: Sequence[ExactSums]) -> ExactSums:
    """The groups of ``parts`` one after another, on one limb range."""
    low = min(p.low for p in parts)
    n = max(p.low + len(p.limbs) for p in parts) - low
    return ExactSums(low, np.concatenate([p.aligned(low, n) for p in parts], axis=1),
                     np.concatenate([p.special for p in parts]))


def _spread(m: np.ndarray, shift: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three signed digits of ``m * 2**shift`` (``|m| < 2**53``, ``0 <= shift < 32``).

    ``m`` is cut at bit 32 so that both halves shifted fit in int64; their parts above and below
    bit 32 are the digits, of magnitude below ``2**33``.
    """
    lo = (m & _MASK) << shift
    hi = (m >> 32) << shift
    return lo & _MASK, (lo >> 32) + (hi & _MASK), hi >> 32


def _special(bits: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """NaN / ±inf flags per group of the non-finite values ``bits``."""
    nan = (bits & _FRACTION) != 0
    flag = np.where(nan, NAN, np.where(bits < 0, NEG_INF, POS_INF)).astype(np.uint8)
    special = np.zeros(groups, np.uint8)
    np.bitwise_or.at(special, group, flag)
    return special


def _accumulate(values: np.ndarray, group: np.ndarray, groups: int) -> ExactSums:
    """One block (at most :data:`BLOCK` values) of :meth:`ExactSums.of_values`."""
    bits = values.view(np.int64)
    magnitude = bits & _ABS  # ordered like the absolute values
    special = np.zeros(groups, np.uint8)
    if magnitude.max(initial=0) >= _EXPONENT:  # a NaN or an infinity
        odd = magnitude >= _EXPONENT
        special = _special(bits[odd], group[odd], groups)
        values, bits = np.where(odd, 0.0, values), np.where(odd, 0, bits)
        magnitude = np.where(odd, 0, magnitude)
    largest = int(magnitude.max(initial=0))
    if largest == 0:
        return ExactSums(0, np.zeros((1, groups), np.int64), special)
    low = _lowest_bit(int(np.min(magnitude, where=magnitude != 0, initial=largest)))
    high = _lowest_bit(largest) + 53  # every value is below 2**(high - 1074)
    first = low >> 5
    out = np.zeros(((high >> 5) + 4 - first, groups), np.int64)  # + digits, carries, headroom
    digits = -(-(high - low) // _DIGIT_BITS)
    if digits <= GRID_DIGITS:
        _on_grid(values, group, out, first, low, digits)
    else:
        _by_value(bits, group, out, first)
    return ExactSums(first, _carry(out), special)


def _lowest_bit(magnitude: int) -> int:
    """Absolute grid position ``o`` of the lowest bit of a double with these magnitude bits."""
    return max((magnitude >> 52) - 1, 0)


def _add(out: np.ndarray, first: int, sums: np.ndarray, position: int) -> None:
    """Add int64 ``sums`` (``|sum| < 2**53``) weighted ``2**position`` to the limbs ``out``."""
    limb = (position >> 5) - first
    for offset, digit in enumerate(_spread(sums, position & 31)):
        out[limb + offset] += digit


def _on_grid(values: np.ndarray, group: np.ndarray, out: np.ndarray, first: int, low: int,
             digits: int) -> None:
    """The fast path: values on a grid from bit ``low``, ``digits`` float64 bincounts per block.

    ``q = x * 2**(1074 - low)`` is an exact integer below ``2**(37 * digits)``. Its 37-bit
    digits, top first, truncate an exact power-of-two scaling toward zero, and subtracting
    them leaves the low bits of ``q`` with its sign (exact; ``floor`` would not be: ``q + 2**74``
    for a small negative ``q`` needs more than 53 bits). A block adds at most ``2**16`` digits of
    magnitude at most ``2**37`` per group, so every float64 partial sum of ``np.bincount`` is an
    integer below ``2**53``: exact.
    """
    groups = out.shape[1]
    scale = 1074 - low
    for s in range(0, len(values), _GRID_BLOCK):
        rest = values[s:s + _GRID_BLOCK] * 2.0 ** min(scale, 1000) * 2.0 ** max(scale - 1000, 0)
        cell = group[s:s + _GRID_BLOCK]
        for j in range(digits - 1, -1, -1):
            digit = np.trunc(rest * 2.0 ** (-_DIGIT_BITS * j)) if j else rest
            if j:
                rest -= digit * 2.0 ** (_DIGIT_BITS * j)
            sums = np.bincount(cell, weights=digit, minlength=groups).astype(np.int64)
            _add(out, first, sums, low + _DIGIT_BITS * j)


def _by_value(bits: np.ndarray, group: np.ndarray, out: np.ndarray, first: int) -> None:
    """Values spread over a wide range: three digits per value at its own limbs, int64 adds."""
    biased = (bits >> 52) & 0x7FF
    normal = (biased != 0).astype(np.int64)
    sign = bits >> 63  # 0 or -1
    m = (((bits & _FRACTION) | (normal << 52)) ^ sign) - sign
    position = biased - normal
    groups = out.shape[1]
    flat = np.maximum((position >> 5) - first, 0) * groups + group  # zeros: any limb (digits 0)
    cells = out.reshape(-1)
    for offset, digit in enumerate(_spread(m, position & 31)):
        np.add.at(cells, flat + offset * groups, digit)


def _carry(limbs: np.ndarray) -> np.ndarray:
    """Propagate carries: every limb but the top one in ``[0, 2**32)``, the top one signed."""
    out = np.array(limbs, dtype=np.int64, copy=True)
    for j in range(len(out) - 1):
        carry = out[j] >> 32
        out[j] &= _MASK
        out[j + 1] += carry
    return out


def _round(digits: np.ndarray, low: int) -> np.ndarray:
    """Nearest double (ties to even) to each column of non-negative uint64 ``digits``.

    ``t`` holds the 64 bits below and including the top set bit (at absolute grid bit ``top``);
    ``sticky`` says whether any bit below them is set. A sum whose top bit is below 53 fits in
    53 bits on the ``2**-1074`` grid and is exact; above, bits 63..11 of ``t`` are the
    significand, bit 10 the rounding bit, and ``np.ldexp`` overflows to inf beyond the range.
    """
    n, g = digits.shape
    nonzero = digits != 0
    h = n - 1 - np.argmax(nonzero[::-1], axis=0)
    cols = np.arange(g)
    padded = np.concatenate([np.zeros((2, g), np.uint64), digits])
    high, mid, rest = padded[h + 2, cols], padded[h + 1, cols], padded[h, cols]
    below = np.concatenate([np.zeros((3, g), bool),
                            np.logical_or.accumulate(nonzero, axis=0)])[h, cols]
    width = np.frexp(high.astype(np.float64))[1].astype(np.uint64)  # bit length, 0 for 0
    width = np.maximum(width, np.uint64(1))
    t = (high << (np.uint64(64) - width)) | (mid << (np.uint64(32) - width)) | (rest >> width)
    sticky = below | ((rest & ((np.uint64(1) << width) - np.uint64(1))) != 0)
    top = 32 * (low + h) + width.astype(np.int64) - 1
    exact = top <= 52
    significand = t >> np.uint64(11)
    rounding = t & np.uint64(0x7FF)
    odd = (significand & np.uint64(1)) != 0
    up = (rounding > 0x400) | ((rounding == 0x400) & (sticky | odd))
    significand = np.where(exact, t >> np.clip(63 - top, 0, 63).astype(np.uint64),
                           significand + up)
    exponent = np.where(exact, -1074, top - 52 - 1074)
    with np.errstate(over="ignore"):
        value: np.ndarray = np.ldexp(significand.astype(np.float64), exponent)
    return value


def running_sums(values: np.ndarray, starts: np.ndarray,
                 base: ExactSums) -> tuple[np.ndarray, ExactSums]:
    """Exactly rounded prefix sums of ``values`` within segments, each seeded with a partial.

    Segment ``i`` is ``values[starts[i]:starts[i + 1]]`` (non-empty; fewer than :data:`BLOCK`
    values in all) and starts from sum ``i`` of ``base``. Returns the rounded sum after every
    value (in the order of ``values``) and the partial after each segment's last value. Each
    segment's base is laid before its values, and one cumulative sum per limb over all segments
    minus each segment's offset (exact in int64, wrapping included) replaces a loop over keys.
    """
    rows, segments = len(values), len(starts) - 1
    sizes = np.diff(starts) + 1
    head = starts[:-1] + np.arange(segments)  # where each base goes
    order = np.insert(np.arange(segments, segments + rows), starts[:-1], np.arange(segments))
    own = np.ones(rows + segments, bool)
    own[head] = False

    def prefix(x: np.ndarray) -> np.ndarray:
        laid = x[order]
        total = np.cumsum(laid)
        out: np.ndarray = (total - np.repeat(total[head] - laid[head], sizes))[own]
        return out

    each = ExactSums.of_values(values, np.arange(rows), rows)
    after = concat([base, each]).summed(prefix)
    return after.to_double(), after.take(starts[1:] - 1)
