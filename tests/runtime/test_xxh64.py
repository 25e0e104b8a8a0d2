"""The NumPy XXH64 of text keys equals the reference implementation, bit for bit."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from spark_stream_sched.runtime.keys import key_hash
from spark_stream_sched.runtime.xxh64 import xxh64


@given(st.lists(st.binary(max_size=300), max_size=60), st.integers(0, 5))
def test_binary_values_equal_the_reference(values: list[bytes], offset: int) -> None:
    array = pa.array([b"x" * offset, *values], pa.binary()).slice(1)  # a non-zero offset too
    want = np.array([xxhash.xxh64_intdigest(v) for v in values], np.uint64)
    assert xxh64(array).tolist() == want.tolist()


@given(st.lists(st.text(max_size=80), max_size=60))
def test_strings_hash_as_their_utf8_bytes(values: list[str]) -> None:
    for kind in (pa.string(), pa.large_string()):
        want = [xxhash.xxh64_intdigest(v.encode()) for v in values]
        assert xxh64(pa.array(values, kind)).tolist() == want


def test_every_length_around_the_stripe_and_word_boundaries() -> None:
    values = [bytes(range(n % 256)) * 1 + bytes(n) for n in range(0, 140)]
    want = [xxhash.xxh64_intdigest(v) for v in values]
    assert xxh64(pa.array(values, pa.binary())).tolist() == want


def test_key_hashes_of_text_keys_never_change() -> None:
    """Existing state is routed by them: the values xxhash gave, pinned."""
    table = pa.table({"s": ["a", "meter-0042", None, "", "é€😀" * 9], "i": [1, 2, 3, 1, -5]})
    assert key_hash(table, ["s", "i"]).tolist() == [
        11613228031839347367, 4762589648841981217, 7502748268536079670, 6217111780749296968,
        1841980277190249758]
    assert key_hash(table, ["s"]).tolist() == [
        17509697563011940720, 9344435812173779726, 2161110741376366143, 12411277393633741270,
        8110542603923890128]
