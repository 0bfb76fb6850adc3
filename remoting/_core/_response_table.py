"""`ResponseTable`: pending requests by opaque, with their deadlines.

Sync bookkeeping with an injected ``now`` (the trio layer calls it); it never does I/O and never
completes a future itself: it returns the entries it removed, and the caller completes them.
Invariants:
- an opaque is in ``entries`` at most once; removing it (``pop``, ``expire``, ``pop_connection``,
  ``pop_all``) is the only way to own its completion, so each entry completes exactly once;
- ``_heap`` may hold entries already removed (lazy deletion); it is rebuilt when it grows to
  more than twice the live entries. It holds (deadline, opaque) only, never the future: a
  completed future (its response body included) must not stay alive until the next rebuild,
  up to 1024 calls later. A heap entry is live while the opaque maps to a future with the
  same deadline.
"""

from __future__ import annotations

import heapq
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._future import ResponseFuture

__all__ = ["ResponseTable"]

_COMPACT_SLACK = 1024


class ResponseTable:
    """Pending `ResponseFuture` objects by opaque."""

    __slots__ = ("_heap", "_thread_lock", "entries")

    def __init__(self) -> None:
        # pending futures by opaque: read it directly on hot paths (a dict lookup is cheaper
        # than a method call); change it only through the methods below
        self.entries: dict[int, ResponseFuture] = {}
        self._heap: list[tuple[float, int]] = []
        self._thread_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, opaque: int) -> bool:
        return opaque in self.entries

    def add(self, fut: ResponseFuture) -> None:
        """Register ``fut`` under its opaque (which must not be pending already). Loop only."""
        # setdefault: check and insert in one step, atomic even against add_from_thread (the
        # first test only catches this very future added twice)
        entries = self.entries
        if entries.get(fut.opaque) is fut or entries.setdefault(fut.opaque, fut) is not fut:
            raise ValueError(f"opaque {fut.opaque} is already pending")
        heap = self._heap
        heapq.heappush(heap, (fut.deadline, fut.opaque))
        if len(heap) > 2 * len(self.entries) + _COMPACT_SLACK:
            with self._thread_lock:  # no insert from a thread may fall between the two lines
                self._heap = [(f.deadline, o) for o, f in self.entries.items()]
                heapq.heapify(self._heap)

    def add_from_thread(self, fut: ResponseFuture) -> None:
        """`add` from a thread other than the loop's (see `_thread_calls`).

        The dict insert and the heap push are each atomic under the GIL; the lock keeps them
        out of a heap rebuild, the one loop-side step that reads the whole dict.
        """
        with self._thread_lock:
            if self.entries.setdefault(fut.opaque, fut) is not fut:
                raise ValueError(f"opaque {fut.opaque} is already pending")
            heapq.heappush(self._heap, (fut.deadline, fut.opaque))

    def pop(self, opaque: int) -> ResponseFuture | None:
        """Remove and return the entry for ``opaque``, or None if it is not pending."""
        return self.entries.pop(opaque, None)

    def pop_for(self, opaque: int, conn: object) -> ResponseFuture | None:
        """Remove and return the entry for ``opaque`` only if it was sent on ``conn``."""
        fut = self.entries.get(opaque)
        if fut is None or fut.conn is not conn:
            return None
        del self.entries[opaque]
        return fut

    def expire(self, now: float) -> list[ResponseFuture]:
        """Remove and return every entry whose deadline is at or before ``now``."""
        heap = self._heap
        entries = self.entries
        expired: list[ResponseFuture] = []
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
            with self._thread_lock:  # a thread's push may have put an earlier entry on top
                if heap and heap[0][1] == opaque and heap[0][0] == deadline:
                    heapq.heappop(heap)
        return None

    def pop_connection(self, conn: object) -> list[ResponseFuture]:
        """Remove and return every entry sent on ``conn``."""
        # list() first: a snapshot taken atomically, even while a thread inserts
        gone = [f for f in list(self.entries.values()) if f.conn is conn]
        for fut in gone:
            del self.entries[fut.opaque]
        return gone

    def pop_all(self) -> list[ResponseFuture]:
        """Remove and return every entry."""
        gone = list(self.entries.values())
        self.entries.clear()
        self._heap.clear()
        return gone
