"""Deadlines in one lazy heap: what is due now costs what is due, never a scan of everything
that waits (NSQ's in-flight and deferred priority queues, trio's timer heap).

Theory of operation (sync, takes ``now``, no I/O):
- `LazyDeadlines` is a min-heap of ``(deadline, key)`` pairs (int keys: an offset, a hold's
  number, a timer's id; str keys: a bus reply address) whose owner says which pairs are
  still *live*: a key removed, or given a new deadline, leaves its old pair in the heap
  (lazy deletion). `pop_due` and `next_deadline` skip and drop the pairs the owner's
  ``live(key, deadline)`` refuses; `compact` rebuilds the heap from the owner's live pairs
  once it holds more than twice them plus `COMPACT_SLACK`, so stale pairs never outnumber
  live ones by much. The heap holds no
  owner's object: what an owner forgets is not kept alive by it. An owner may give a key the
  same deadline twice (removed and added again): `pop_due` asks the owner to *take* each
  pair in turn (``take(key, deadline)`` removes the entry if that pair is live and returns
  it), so the second pair finds nothing.
- `DeadlineHeap` is one deadline per key, for owners that have no table of their own (the
  queue service's timers: a channel's next deadline, a topic's next deferred message, its
  next key to forget). `schedule` keeps the earlier of two deadlines (a key whose deadline
  moves later fires early, finds nothing due, and is scheduled again by its owner);
  `pop_due` removes and returns the keys due, earliest first. Every operation is O(log n)
  in the keys scheduled, and ``visited`` counts the pairs `pop_due` looked at: what a timer
  tick cost.

`ResponseTable` (pending calls, both drivers), `HoldTable` (held requests), `InFlight` (a
queue channel's deliveries) and the bus's `ReplyTable` (reply addresses) keep their
deadlines in a `LazyDeadlines`; the queue service's timer task sleeps until a
`DeadlineHeap`'s first. It lives with the drivers' shared parts
because the core's response table is its first user; what the messaging features build on
it imports it from here (nothing here imports anything of theirs).
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["COMPACT_SLACK", "DeadlineHeap", "LazyDeadlines"]

E = TypeVar("E")
K = TypeVar("K", int, str)  # a key: ties on a deadline are ordered by it

# Stale pairs a heap may hold beyond twice its live ones before it is rebuilt: a rebuild is
# O(n), so it waits until it frees at least this many.
COMPACT_SLACK: Final = 1024

_push = heapq.heappush
_pop = heapq.heappop


class LazyDeadlines(Generic[K]):
    """A lazy min-heap of ``(deadline, key)``; the owner says which pairs are live (see the
    module docstring). ``heap`` may be pushed to directly on a hot path
    (``heapq.heappush(d.heap, (deadline, key))``), as `push` does."""

    __slots__ = ("heap",)

    def __init__(self) -> None:
        self.heap: list[tuple[float, K]] = []

    def __len__(self) -> int:
        """Pairs in the heap, stale ones included."""
        return len(self.heap)

    def push(self, deadline: float, key: K) -> None:
        """Add ``key`` due at ``deadline``."""
        _push(self.heap, (deadline, key))

    def pop_due(self, now: float, take: Callable[[K, float], E | None]) -> list[E]:
        """Remove the pairs due at ``now``, earliest first, and for each ask the owner to
        ``take(key, deadline)``: remove and return its entry if that pair is live, else
        None. Return what was taken."""
        heap = self.heap
        taken: list[E] = []
        while heap and heap[0][0] <= now:
            deadline, key = _pop(heap)
            entry = take(key, deadline)
            if entry is not None:
                taken.append(entry)
        return taken

    def next_deadline(self, live: Callable[[K, float], bool]) -> float | None:
        """Return the earliest live deadline (None: none), dropping stale pairs on top."""
        heap = self.heap
        while heap:
            deadline, key = heap[0]
            if live(key, deadline):
                return deadline
            _pop(heap)
        return None

    def compact(self, live_count: int, live_pairs: Callable[[], Iterable[tuple[float, K]]]
                ) -> bool:
        """Rebuild the heap from ``live_pairs()`` if it holds more than twice
        ``live_count`` plus `COMPACT_SLACK` pairs; return True if it did."""
        if len(self.heap) <= 2 * live_count + COMPACT_SLACK:
            return False
        self.heap = list(live_pairs())
        heapq.heapify(self.heap)
        return True

    def clear(self) -> None:
        """Forget every pair."""
        self.heap.clear()


class DeadlineHeap:
    """One deadline per int key, earliest first (see the module docstring)."""

    __slots__ = ("_due", "_heap", "visited")

    def __init__(self) -> None:
        self._due: dict[int, float] = {}
        self._heap = LazyDeadlines()
        self.visited = 0  # heap pairs `pop_due` looked at, since made

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: int) -> bool:
        return key in self._due

    def get(self, key: int) -> float | None:
        """Return when ``key`` is due (None: not scheduled)."""
        return self._due.get(key)

    def schedule(self, key: int, deadline: float) -> bool:
        """Make ``key`` due at ``deadline`` unless it is due earlier already; return True
        if this moved the heap's first deadline earlier (a sleeping timer must wake
        sooner)."""
        due = self._due
        current = due.get(key)
        if current is not None and current <= deadline:
            return False
        first = self.next_deadline()
        due[key] = deadline
        self._heap.push(deadline, key)
        self._heap.compact(len(due), due_pairs(due))
        return first is None or deadline < first

    def discard(self, key: int) -> bool:
        """Unschedule ``key``; return False if it was not scheduled."""
        return self._due.pop(key, None) is not None

    def pop_due(self, now: float) -> list[int]:
        """Remove and return the keys due at ``now``, earliest first."""
        due = self._due
        heap = self._heap.heap
        keys: list[int] = []
        while heap and heap[0][0] <= now:
            deadline, key = _pop(heap)
            self.visited += 1
            if due.get(key) == deadline:
                del due[key]
                keys.append(key)
        return keys

    def next_deadline(self) -> float | None:
        """Return the earliest deadline scheduled (None: nothing is)."""
        due = self._due
        return self._heap.next_deadline(lambda key, deadline: due.get(key) == deadline)

    def clear(self) -> None:
        """Unschedule every key."""
        self._due.clear()
        self._heap.clear()


def due_pairs(due: dict[int, float]) -> Callable[[], Iterable[tuple[float, int]]]:
    """Return a function listing ``due``'s pairs as ``(deadline, key)`` (for `compact`)."""
    return lambda: [(deadline, key) for key, deadline in due.items()]


_ids = itertools.count(1)


def new_key() -> int:
    """Return an int key never returned before in this process (a timer's id)."""
    return next(_ids)
