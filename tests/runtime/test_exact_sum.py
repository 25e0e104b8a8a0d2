"""The exact accumulator equals math.fsum and merges partials exactly in any grouping."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_stream_sched.runtime import exact_digits, exact_sum
from spark_stream_sched.runtime.exact_partials import from_arrow, to_arrow
from spark_stream_sched.runtime.exact_sum import ExactSums, concat, running_sums
from spark_stream_sched.testing.reference import float_sum

#: The monkeypatched constants are the same for every example, so a function-scoped fixture is fine.
PROFILE = settings(max_examples=200, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
M = 1.7976931348623157e308  # the largest double

#: Any double (NaN and infinities included), values near one another (the grid path) and the
#: cases that break naive sums.
doubles = st.one_of(
    st.floats(), st.floats(-1e3, 1e3), st.floats(-1e-300, 1e-300),
    st.sampled_from([0.1, 0.2, 0.3, -0.0, 0.0, 1e16, -1e16, 1.0, M, -M, 1e308, -1e308,
                     5e-324, -5e-324, 2.0 ** -1022, 2.0 ** 970, math.inf, -math.inf]))


def bits(value: float) -> str:
    """Hex form: equal strings are equal doubles (every NaN is "nan")."""
    return float(value).hex()


def sums_of(values: list[float], groups: list[int], n: int) -> list[str]:
    got = ExactSums.of_values(np.array(values, np.float64), np.array(groups, np.int64), n)
    return [bits(x) for x in got.to_double()]


def oracle(values: list[float], groups: list[int], n: int) -> list[str]:
    return [bits(float_sum([v for v, g in zip(values, groups, strict=True) if g == k]))
            for k in range(n)]


@st.composite
def grouped(draw: st.DrawFn) -> tuple[list[float], list[int], int]:
    n = draw(st.integers(1, 4))
    values = draw(st.lists(doubles, max_size=40))
    groups = draw(st.lists(st.integers(0, n - 1), min_size=len(values), max_size=len(values)))
    return values, groups, n


@pytest.mark.parametrize("grid_digits", [0, exact_digits.GRID_DIGITS])
@PROFILE
@given(case=grouped())
def test_sums_equal_fsum_on_both_paths(monkeypatch: pytest.MonkeyPatch, grid_digits: int,
                                       case: tuple[list[float], list[int], int]) -> None:
    """``grid_digits=0`` sends every call down the by-value path."""
    monkeypatch.setattr(exact_digits, "GRID_DIGITS", grid_digits)
    assert sums_of(*case) == oracle(*case)


@pytest.mark.parametrize(("values", "expected"), [
    ([0.1, 0.2, 0.3], 0.6),  # the left fold gives 0.6000000000000001
    ([0.3, 0.2, 0.1], 0.6),
    ([1e16, 1.0, 1.0, -1e16], 2.0),  # the left fold gives 0.0
    ([1e308, 1e308, -1e308], 1e308),  # math.fsum itself raises OverflowError here
    ([M, M], math.inf), ([-M, -M], -math.inf),
    ([M, 2.0 ** 970], math.inf),  # exactly halfway to 2**1024: ties to even overflow
    ([M, 2.0 ** 970, -5e-324], M),  # just below halfway
    ([math.inf, 1e308, 1e308], math.inf), ([math.inf, -math.inf], math.nan),
    ([math.nan, 1.0], math.nan), ([-0.0], 0.0), ([-0.0, -0.0], 0.0), ([], 0.0),
    ([5e-324, 5e-324, 5e-324], 1.5e-323), ([2.0 ** -1022, -5e-324], 2.0 ** -1022 - 5e-324),
    ([2.0 ** 53, 1.0], 2.0 ** 53), ([2.0 ** 53, 1.0, 2.0 ** -60], 2.0 ** 53 + 2),
])
def test_known_sums(values: list[float], expected: float) -> None:
    assert sums_of(values, [0] * len(values), 1) == [bits(expected)]


@pytest.mark.parametrize("by_bincount", [0, exact_sum.MERGE_BY_BINCOUNT])
@PROFILE
@given(case=grouped(), seed=st.integers(0, 2 ** 32))
def test_partials_merge_exactly_in_any_grouping_and_order(
        monkeypatch: pytest.MonkeyPatch, by_bincount: int,
        case: tuple[list[float], list[int], int], seed: int) -> None:
    """Partials of arbitrary chunks, some through Arrow, merged in a random tree: same bits.

    ``by_bincount=0`` merges with ``np.add.at`` only.
    """
    monkeypatch.setattr(exact_sum, "MERGE_BY_BINCOUNT", by_bincount)
    values, groups, n = case
    rng = random.Random(seed)
    cuts = sorted(rng.randint(0, len(values)) for _ in range(rng.randint(0, 5)))
    edges = [0, *cuts, len(values)]
    parts = []
    for a, b in zip(edges, edges[1:], strict=False):
        part = ExactSums.of_values(np.array(values[a:b], np.float64),
                                   np.array(groups[a:b], np.int64), n)
        parts.append(from_arrow(to_arrow(part)) if rng.random() < 0.5 else part)
    while len(parts) > 1:  # merge two random partials (or more) until one is left
        rng.shuffle(parts)
        k = rng.randint(2, len(parts))
        both = concat(parts[:k])
        rows = rng.sample(range(both.groups), both.groups)  # the same sums, in another order
        merged = both.merge(np.tile(np.arange(n), k)[rows], n, np.array(rows))
        parts = [merged, *parts[k:]]
    assert [bits(x) for x in parts[0].to_double()] == oracle(values, groups, n)
    assert [bits(x) for x in parts[0].trimmed().to_double()] == oracle(values, groups, n)
    direct = ExactSums.of_values(np.array(values, np.float64), np.array(groups, np.int64), n)
    assert to_arrow(parts[0]).equals(to_arrow(direct))  # the same sums, the same encoding


@PROFILE
@given(case=grouped())
def test_more_values_than_one_block(monkeypatch: pytest.MonkeyPatch,
                                    case: tuple[list[float], list[int], int]) -> None:
    """Blocks of 3 values per call: the blocks' partials are merged exactly."""
    monkeypatch.setattr(exact_digits, "BLOCK", 3)
    assert sums_of(*case) == oracle(*case)


def test_grid_blocks_keep_every_bit() -> None:
    """70 000 values whose low 37-bit digit is all ones: one bincount of them all would pass
    ``2**53`` (70 000 * (2**37 - 1)) and lose bits; blocks of ``2**16`` do not."""
    values = [2.0 - 2.0 ** -52] * 70_000 + [-(1.0 + 2.0 ** -52)] * 5
    assert sums_of(values, [0] * len(values), 1) == [bits(math.fsum(values))]


@PROFILE
@given(segments=st.lists(st.tuples(st.lists(doubles, max_size=3),
                                   st.lists(doubles, min_size=1, max_size=8)),
                         min_size=1, max_size=4))
def test_running_sums_are_exactly_rounded_prefixes(
        segments: list[tuple[list[float], list[float]]]) -> None:
    """Each segment starts from the partial of its own earlier values (state of a key)."""
    base = concat([ExactSums.of_values(np.array(b, np.float64), np.zeros(len(b), np.int64), 1)
                   for b, _ in segments])
    values = [v for _, rows in segments for v in rows]
    starts = np.cumsum([0] + [len(rows) for _, rows in segments])
    sums, ends = running_sums(np.array(values, np.float64), starts, base)
    want = [bits(float_sum(b + rows[:j + 1])) for b, rows in segments for j in range(len(rows))]
    assert [bits(x) for x in sums] == want
    assert [bits(x) for x in ends.to_double()] == [bits(float_sum(b + r)) for b, r in segments]


def test_trimmed_sum_whose_signed_top_limb_is_minus_2_to_31_keeps_its_sign() -> None:
    """Found by Hypothesis: -2**-52 twice trimmed to a top limb of -2**31, read as positive."""
    sums = ExactSums.of_values(np.array([-2.0 ** -52] * 2), np.array([0, 0], np.int64), 1)
    assert sums.trimmed().to_double().tolist() == [-2.0 ** -51]
    assert sums.to_double().tolist() == [-2.0 ** -51]


@PROFILE
@given(parts=st.lists(st.tuples(st.lists(doubles, max_size=4), st.booleans()), min_size=1,
                      max_size=4))
def test_concatenated_sums_keep_their_values_on_any_limb_ranges(
        parts: list[tuple[list[float], bool]]) -> None:
    """One sum per part, trimmed or not, side by side (``concat``) and read back from Arrow
    chunks (``from_arrow``): each keeps its value, whatever limbs its neighbours use."""
    sums = [ExactSums.of_values(np.array(v, np.float64), np.zeros(len(v), np.int64), 1)
            for v, _ in parts]
    sums = [s.trimmed() if trim else s for s, (_, trim) in zip(sums, parts, strict=True)]
    want = [bits(float_sum(v)) for v, _ in parts]
    assert [bits(x) for x in concat(sums).to_double()] == want
    chunked = pa.chunked_array([to_arrow(s) for s in sums])
    assert [bits(x) for x in from_arrow(chunked).to_double()] == want


def test_a_negative_sum_beside_a_sum_on_higher_limbs_stays_negative() -> None:
    """A part on fewer limbs sits under zero limbs in ``concat``: its top limb must become the
    sign again (-1.0 beside 2**100 read as 7.0e13 before)."""
    negative = ExactSums.of_values(np.array([-1.0]), np.zeros(1, np.int64), 1).trimmed()
    wide = ExactSums.of_values(np.array([2.0 ** 100]), np.zeros(1, np.int64), 1)
    assert concat([negative, wide]).to_double().tolist() == [-1.0, 2.0 ** 100]
    assert concat([wide, negative]).to_double().tolist() == [2.0 ** 100, -1.0]
