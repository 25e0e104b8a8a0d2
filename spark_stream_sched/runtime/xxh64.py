"""XXH64 (zero seed) of many byte strings at once, in NumPy: the stable hash of text keys.

:func:`~spark_stream_sched.runtime.keys.stable_key_hash` hashes each distinct string or binary
key value with XXH64 of its bytes (UTF-8 for strings). This module computes it for a whole Arrow
array in vectorised steps, so the package needs no compiled hashing library of its own and can
travel to a cluster as plain Python (docs/deploy.md): the values' bytes are read as
little-endian 64-bit words from the Arrow data buffer, and every step of the algorithm runs on
all the values that have reached it. The result is bit for bit the reference implementation's
(``xxhash.xxh64_intdigest``; a property test compares them).

The algorithm (Yann Collet's XXH64 specification): inputs of 32 bytes or more run four
accumulators over 32-byte stripes, then merge them; shorter ones start from ``PRIME64_5``. The
length is added; the remaining bytes are folded as 8-byte words, at most one 4-byte word, then
single bytes; an avalanche mixes the result. The loop over stripes runs ``max(len) / 32`` times,
each time over only the values still that long.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["xxh64"]

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
_STRIPE, _WORD = 32, 8


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    rotated: np.ndarray = (x << np.uint64(r)) | (x >> np.uint64(64 - r))
    return rotated


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    mixed: np.ndarray = _rotl(acc + lane * P2, 31) * P1
    return mixed


def _merge(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    merged: np.ndarray = (h ^ _round(np.zeros_like(v), v)) * P1 + P4
    return merged


class _Bytes:
    """The values' bytes, read as little-endian words at any byte offset (one gather each)."""

    def __init__(self, values: pa.Array) -> None:
        binary = values.cast(pa.large_binary())  # one layout: int64 offsets
        _, offsets_buffer, data_buffer = binary.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int64, len(binary) + 1, binary.offset * 8)
        self.starts = offsets[:-1].copy()
        self.lengths = offsets[1:] - offsets[:-1]
        raw = (np.frombuffer(data_buffer, np.uint8) if data_buffer is not None
               else np.zeros(0, np.uint8))
        padded = np.concatenate([raw, np.zeros(_WORD, np.uint8)])  # a word may overrun
        #: the word starting at every byte offset: views with a stride of one byte
        self._at = {size: np.ndarray((len(raw) + 1,), np.dtype(f"<u{size}"), padded, 0, (1,))
                    for size in (8, 4, 1)}

    def words(self, positions: np.ndarray, size: int) -> np.ndarray:
        """The ``size``-byte little-endian words (``size`` 1, 4 or 8) at ``positions``."""
        words: np.ndarray = self._at[size][positions].astype(np.uint64)
        return words


def _stripes(data: _Bytes, rows: np.ndarray) -> np.ndarray:
    """The merged four-accumulator state of the values at ``rows`` (each at least 32 bytes)."""
    n = len(rows)
    acc = [np.full(n, P1 + P2), np.full(n, P2), np.zeros(n, np.uint64),
           np.full(n, np.uint64(0) - P1)]
    stripes = data.lengths[rows] // _STRIPE
    for k in range(int(stripes.max())):
        live = np.nonzero(stripes > k)[0]
        base = data.starts[rows[live]] + k * _STRIPE
        for lane in range(4):
            acc[lane][live] = _round(acc[lane][live], data.words(base + lane * _WORD, 8))
    h: np.ndarray = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
    for v in acc:
        h = _merge(h, v)
    return h


def _tail(data: _Bytes, h: np.ndarray) -> np.ndarray:
    """Fold the bytes after the last whole stripe: 8-byte words, a 4-byte word, single bytes."""
    position = data.starts + data.lengths // _STRIPE * _STRIPE
    left = data.lengths % _STRIPE
    while (live := np.nonzero(left >= 8)[0]).size:
        k1 = _round(np.zeros(live.size, np.uint64), data.words(position[live], 8))
        h[live] = _rotl(h[live] ^ k1, 27) * P1 + P4
        position[live] += 8
        left[live] -= 8
    live = np.nonzero(left >= 4)[0]
    if live.size:
        h[live] = _rotl(h[live] ^ (data.words(position[live], 4) * P1), 23) * P2 + P3
        position[live] += 4
        left[live] -= 4
    while (live := np.nonzero(left > 0)[0]).size:
        h[live] = _rotl(h[live] ^ (data.words(position[live], 1) * P5), 11) * P1
        position[live] += 1
        left[live] -= 1
    return h


def xxh64(values: pa.Array) -> np.ndarray:
    """XXH64 with a zero seed of each value's bytes (strings as UTF-8), as ``uint64``.

    A null slot hashes as the bytes the array holds for it (none, normally); callers that hash
    nulls to a constant replace them.
    """
    data = _Bytes(values)
    with np.errstate(over="ignore"):
        h = np.full(len(values), P5)
        long = np.nonzero(data.lengths >= _STRIPE)[0]
        if long.size:
            h[long] = _stripes(data, long)
        h = _tail(data, h + data.lengths.astype(np.uint64))
        h ^= h >> np.uint64(33)
        h *= P2
        h ^= h >> np.uint64(29)
        h *= P3
        h ^= h >> np.uint64(32)
    return h
