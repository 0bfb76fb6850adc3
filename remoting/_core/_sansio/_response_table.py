"""`ResponseTable`: pending requests by opaque, with their deadlines.

Sync bookkeeping with an injected ``now``, on the loop thread only; it never does I/O and
never completes a future itself: it returns the entries it removed, and the caller completes
them. Invariants:
- an opaque is in ``entries`` at most once; removing it (``pop_for``, ``expire``,
  ``pop_connection``, ``pop_all``) is the only way to own its completion, so each entry
  completes exactly once;
- ``_heap`` may hold entries already removed (lazy deletion); it is rebuilt when it grows to
  more than twice the live entries plus `_COMPACT_SLACK`. It holds (deadline, opaque) only,
  never the future: a completed call (its response body included) must not stay alive until
  the next rebuild. A heap entry is live while its opaque maps to a future with that deadline.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from .._calling._future import ResponseFuture

__all__ = ["ResponseTable"]

F = TypeVar("F", bound="ResponseFuture")

_COMPACT_SLACK: Final = 1024
_push = heapq.heappush


class ResponseTable(Generic[F]):
    """Pending `ResponseFuture` objects (of one driver's class) by opaque."""

    __slots__ = ("_heap", "entries")

    def __init__(self) -> None:
        # pending futures by opaque: hot paths may read it directly (a dict lookup is cheaper
        # than a method call); change it only through the methods below
        self.entries: dict[int, F] = {}
        self._heap: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, opaque: int) -> bool:
        return opaque in self.entries

    @property
    def deadline_entries(self) -> int:
        """Entries in the deadline heap, removed ones included (bounded by compaction)."""
        return len(self._heap)

    def add(self, fut: F) -> None:
        """Register ``fut`` under its opaque.

        Raises:
            ValueError: the opaque is already pending.
        """
        entries = self.entries
        if fut.opaque in entries:
            raise ValueError(f"opaque {fut.opaque} is already pending")
        entries[fut.opaque] = fut
        heap = self._heap
        _push(heap, (fut.deadline, fut.opaque))
        if len(heap) > 2 * len(entries) + _COMPACT_SLACK:
            self._heap = [(f.deadline, o) for o, f in entries.items()]
            heapq.heapify(self._heap)

    def add_all(self, futs: list[F], start: int = 0) -> int:
        """Register ``futs[start:]`` under their opaques, in order (as `add`, for a batch at
        once), up to the first whose opaque is already pending; return how many were."""
        entries = self.entries
        heap = self._heap
        added = 0
        for fut in futs[start:] if start else futs:
            opaque = fut.opaque
            if opaque in entries:
                break
            entries[opaque] = fut
            _push(heap, (fut.deadline, opaque))
            added += 1
        if len(heap) > 2 * len(entries) + _COMPACT_SLACK:
            self._heap = [(f.deadline, o) for o, f in entries.items()]
            heapq.heapify(self._heap)
        return added

    def pop_for(self, opaque: int, conn: object) -> F | None:
        """Remove and return the entry for ``opaque`` only if it was sent on ``conn``."""
        fut = self.entries.get(opaque)
        if fut is None or fut.conn is not conn:
            return None
        del self.entries[opaque]
        return fut

    def expire(self, now: float) -> list[F]:
        """Remove and return every entry whose deadline is at or before ``now``."""
        heap = self._heap
        entries = self.entries
        expired: list[F] = []
        while heap and heap[0][0] <= now:
            deadline, opaque = heapq.heappop(heap)
            fut = entries.get(opaque)
            if fut is not None and fut.deadline == deadline:
                del entries[opaque]
                expired.append(fut)
        return expired

    def next_deadline(self) -> float | None:
        """Return the earliest deadline still pending, or None."""
        heap = self._heap
        entries = self.entries
        while heap:
            deadline, opaque = heap[0]
            fut = entries.get(opaque)
            if fut is not None and fut.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_connection(self, conn: object) -> list[F]:
        """Remove and return every entry sent on ``conn``."""
        gone = [f for f in self.entries.values() if f.conn is conn]
        for fut in gone:
            del self.entries[fut.opaque]
        return gone

    def pop_all(self) -> list[F]:
        """Remove and return every entry."""
        gone = list(self.entries.values())
        self.entries.clear()
        self._heap.clear()
        return gone
