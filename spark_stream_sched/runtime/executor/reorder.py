"""The non-blocking reorder buffer of Prasaad et al. (2018) (§4, fig. 4).

Workers finish packets in any order; an order-sensitive consumer must see them by sequence
number. :class:`ReorderBuffer` holds the packets that arrived early and releases the longest
contiguous run ``next_seq, next_seq + 1, ...`` as soon as its first packet arrives. Producers
never wait (the paper's non-blocking variant): :meth:`offer` returns at once, with the packets
that became releasable, possibly none.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from spark_stream_sched.errors import StateError


class Sequenced(Protocol):
    """Anything with a sequence number (a packet)."""

    @property
    def seq(self) -> int:
        """Position in the sequential order (0, 1, 2, ...)."""
        ...


T = TypeVar("T", bound=Sequenced)


class ReorderBuffer(Generic[T]):
    """Releases items strictly in ``seq`` order; holds early ones (Prasaad et al. 2018, fig. 4).

    Parameters
    ----------
    name
        What the buffer stands in front of (named in errors).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.next_seq = 0
        self._early: dict[int, T] = {}

    def offer(self, item: T) -> list[T]:
        """Add ``item``; return the items now releasable, in ``seq`` order.

        Raises
        ------
        StateError
            When a sequence number arrives twice (a bug in the producer).
        """
        if item.seq < self.next_seq or item.seq in self._early:
            raise StateError(f"{self.name}: packet {item.seq} was pushed twice")
        self._early[item.seq] = item
        released = []
        while self.next_seq in self._early:
            released.append(self._early.pop(self.next_seq))
            self.next_seq += 1
        return released

    def __len__(self) -> int:
        """Number of items held back (arrived early)."""
        return len(self._early)
