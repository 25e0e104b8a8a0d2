"""Doubles onto the limb grid: exact per-group sums of float64 values as int64 limbs.

Every finite double is an integer multiple of ``2**-1074``: ``x = ±m * 2**o * 2**-1074`` with
``m < 2**53`` and ``0 <= o <= 2045``, both read from its bits. That absolute grid is cut into
32-bit limbs (limb ``j`` weighs ``2**(32*j - 1074)``); :func:`accumulate` adds values per group
on the limbs their data touches, by one of two exact paths:

* the grid (usual data: all values within ``37 * GRID_DIGITS`` bits of each other): scaled by a
  power of two, every value is an integer on one grid; it is cut into 37-bit digits with float64
  ``trunc`` and subtraction, and each digit is added per group with ``np.bincount``, exact while
  a partial stays below ``2**53`` (at most ``2**16`` digits per call): see :func:`_on_grid`;
* by value (wider spans): each value's ``m * 2**(o % 32)`` becomes three digits below ``2**33``
  on its own limbs, added with ``np.add.at`` in int64 (at most :data:`BLOCK` per call:
  ``2**26 * 2**33 < 2**63``).

:func:`carry` then propagates carries: every limb but the top one in ``[0, 2**32)``, the top one
signed. NaN and the infinities are flags next to the limbs, not digits.
"""

from __future__ import annotations

import numpy as np

#: Special-value flags of a group (bitwise or).
NAN, POS_INF, NEG_INF = 1, 2, 4
#: Most values one call adds into one cell before carries are propagated.
BLOCK = 1 << 26
#: Most 37-bit digits per value on the fast path (values spanning up to 111 bits).
GRID_DIGITS = 3
_DIGIT_BITS = 37
_GRID_BLOCK = 1 << 16
_MASK = (1 << 32) - 1
_EXPONENT = 0x7FF << 52
_ABS = (1 << 63) - 1
_FRACTION = (1 << 52) - 1


def _spread(m: np.ndarray, shift: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three signed digits of ``m * 2**shift`` (int64 ``m``, ``0 <= shift < 32``).

    ``m`` is cut at bit 32 so that both halves shifted fit in int64 (the high half is below
    ``2**31``); their parts above and below bit 32 are the digits, of magnitude below ``2**33``.
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


def accumulate(values: np.ndarray, group: np.ndarray | None,
               groups: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Exact sums of at most :data:`BLOCK` float64 ``values`` per ``group`` in ``[0, groups)``.

    ``group=None``: value ``i`` is group ``i``, nothing is added. Returns the index of the first
    limb, the carried ``[limb, group]`` int64 limbs and the special-value flags per group.
    """
    bits = values.view(np.int64)
    magnitude = bits & _ABS  # ordered like the absolute values
    special = np.zeros(groups, np.uint8)
    if magnitude.max(initial=0) >= _EXPONENT:  # a NaN or an infinity
        odd = magnitude >= _EXPONENT
        special = _special(bits[odd], np.flatnonzero(odd) if group is None else group[odd],
                           groups)
        values, bits = np.where(odd, 0.0, values), np.where(odd, 0, bits)
        magnitude = np.where(odd, 0, magnitude)
    largest = int(magnitude.max(initial=0))
    if largest == 0:
        return 0, np.zeros((1, groups), np.int64), special
    low = _lowest_bit(int(np.min(magnitude, where=magnitude != 0, initial=largest)))
    high = _lowest_bit(largest) + 53  # every value is below 2**(high - 1074)
    first = low >> 5
    out = np.zeros(((high >> 5) + 4 - first, groups), np.int64)  # + digits, carries, headroom
    digits = -(-(high - low) // _DIGIT_BITS)
    if digits <= GRID_DIGITS:
        _on_grid(values, group, out, first, low, digits)
    else:
        _by_value(bits, group, out, first)
    return first, carry(out), special


def _lowest_bit(magnitude: int) -> int:
    """Absolute grid position ``o`` of the lowest bit of a double with these magnitude bits."""
    return max((magnitude >> 52) - 1, 0)


def _add(out: np.ndarray, first: int, sums: np.ndarray, position: int) -> None:
    """Add int64 ``sums`` weighted ``2**position`` to the limbs ``out``."""
    limb = (position >> 5) - first
    for offset, digit in enumerate(_spread(sums, position & 31)):
        out[limb + offset] += digit


def _on_grid(values: np.ndarray, group: np.ndarray | None, out: np.ndarray, first: int,
             low: int, digits: int) -> None:
    """The fast path: values on a grid from bit ``low``, ``digits`` float64 bincounts per block.

    ``q = x * 2**(1074 - low)`` is an exact integer below ``2**(37 * digits)``. Its 37-bit
    digits, top first, truncate an exact power-of-two scaling toward zero, and subtracting
    them leaves the low bits of ``q`` with its sign (exact; ``floor`` would not be: ``q + 2**74``
    for a small negative ``q`` needs more than 53 bits). A block adds at most ``2**16`` digits of
    magnitude at most ``2**37`` per group, so every float64 partial sum of ``np.bincount`` is an
    integer below ``2**53``: exact. The blocks' sums add up in int64 (at most
    ``BLOCK / 2**16 = 2**10`` of them) and are spread onto the limbs once per digit.
    """
    groups = out.shape[1]
    scale = 2.0 ** min(1074 - low, 1000), 2.0 ** max(1074 - low - 1000, 0)
    totals = np.zeros((digits, groups), np.int64)
    for s in range(0, len(values), _GRID_BLOCK):
        rest = values[s:s + _GRID_BLOCK] * scale[0]
        if scale[1] != 1.0:
            rest *= scale[1]
        if group is None:  # value s + i is group s + i: its digits are its totals
            span, cell = slice(s, s + len(rest)), None
        else:  # the groups of a block (often a narrow range: rows come by pane)
            cell = group[s:s + _GRID_BLOCK]
            first_group = int(cell.min(initial=0))
            span = slice(first_group, int(cell.max(initial=0)) + 1)
            cell = cell - first_group
        digit = np.empty_like(rest)
        for j in range(digits - 1, 0, -1):
            np.multiply(rest, 2.0 ** (-_DIGIT_BITS * j), out=digit)
            np.trunc(digit, out=digit)
            _sum_digit(totals[j, span], digit, cell)
            digit *= 2.0 ** (_DIGIT_BITS * j)
            rest -= digit
        _sum_digit(totals[0, span], rest, cell)
    for j in range(digits):
        _add(out, first, totals[j], low + _DIGIT_BITS * j)


def _sum_digit(totals: np.ndarray, digit: np.ndarray, cell: np.ndarray | None) -> None:
    """Add the (integral float64) ``digit`` of each value to its group's int64 ``totals``.

    ``cell=None``: value ``i`` is group ``i``, the digit is its total.
    """
    if cell is None:
        totals[:] = digit
    else:
        totals += np.bincount(cell, weights=digit, minlength=len(totals)).astype(np.int64)


def _by_value(bits: np.ndarray, group: np.ndarray | None, out: np.ndarray, first: int) -> None:
    """Values spread over a wide range: three digits per value at its own limbs, int64 adds."""
    biased = (bits >> 52) & 0x7FF
    normal = (biased != 0).astype(np.int64)
    sign = bits >> 63  # 0 or -1
    m = (((bits & _FRACTION) | (normal << 52)) ^ sign) - sign
    position = biased - normal
    groups = out.shape[1]
    flat = np.maximum((position >> 5) - first, 0) * groups + (
        np.arange(groups) if group is None else group)  # zeros: any limb (their digits are 0)
    cells = out.reshape(-1)
    for offset, digit in enumerate(_spread(m, position & 31)):
        if group is None:  # one value per group: its digits land on distinct cells
            cells[flat + offset * groups] = digit
        else:
            np.add.at(cells, flat + offset * groups, digit)


def carry(limbs: np.ndarray) -> np.ndarray:
    """Propagate carries in place: every limb but the top one in ``[0, 2**32)``, the top signed.

    ``limbs`` is a fresh int64 array the caller owns; it is returned.
    """
    for j in range(len(limbs) - 1):
        carry = limbs[j] >> 32
        limbs[j] &= _MASK
        limbs[j + 1] += carry
    return limbs
