"""`HoldTable`: requests parked until something they wait for happens, or their deadline
(RocketMQ's ``PullRequestHoldService``).

Theory of operation (sync, takes ``now``, no I/O):
- A hold is an item (whatever the caller needs to answer later) under a key (a topic, say)
  with a deadline, and optionally an owner (the connection it came from). It costs one small
  object and one heap entry: no task, no thread.
- `notify` removes and returns every hold of a key, in the order they were added; the caller
  answers them or adds back those that must wait on. `expire` removes and returns the holds
  whose deadline passed. `remove_owner` removes and returns every hold of an owner (its
  connection closed: nobody is left to answer). Whoever removes a hold owns it: each is
  returned once.
- Deadlines sit in a `LazyDeadlines` heap of ``(deadline, hold number)``; a hold removed by
  `notify` leaves a stale pair, skipped when met and dropped when the heap is rebuilt.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Generic, TypeVar

from .._core._sansio._deadlines import COMPACT_SLACK, LazyDeadlines

if TYPE_CHECKING:
    from collections.abc import Hashable

__all__ = ["Hold", "HoldTable"]

T = TypeVar("T")


class Hold(Generic[T]):
    """One parked item: its key, deadline, owner and number (the order holds were added
    in)."""

    __slots__ = ("deadline", "item", "key", "number", "owner")

    def __init__(self, number: int, key: Hashable, deadline: float, item: T,
                 owner: Hashable) -> None:
        self.number = number
        self.key = key
        self.deadline = deadline
        self.item = item
        self.owner = owner


class HoldTable(Generic[T]):
    """Held items by key and by deadline."""

    __slots__ = ("_by_key", "_by_number", "_by_owner", "_heap", "_numbers")

    def __init__(self) -> None:
        self._by_key: dict[Hashable, dict[int, Hold[T]]] = {}
        self._by_owner: dict[Hashable, dict[int, Hold[T]]] = {}  # holds with an owner
        self._by_number: dict[int, Hold[T]] = {}
        self._heap = LazyDeadlines[int]()
        self._numbers = itertools.count()

    def __len__(self) -> int:
        return len(self._by_number)

    def held(self, key: Hashable) -> int:
        """Return how many holds wait on ``key``."""
        return len(self._by_key.get(key, ()))

    def held_by(self, owner: Hashable) -> int:
        """Return how many holds ``owner`` has."""
        return len(self._by_owner.get(owner, ()))

    def add(self, key: Hashable, deadline: float, item: T, owner: Hashable = None) -> Hold[T]:
        """Park ``item`` under ``key`` until notified or ``deadline`` (``owner``: whose it
        is, for `remove_owner`; None: nobody's)."""
        hold = Hold(next(self._numbers), key, deadline, item, owner)
        self._by_number[hold.number] = hold
        self._by_key.setdefault(key, {})[hold.number] = hold
        if owner is not None:
            self._by_owner.setdefault(owner, {})[hold.number] = hold
        heap = self._heap
        heap.push(deadline, hold.number)
        by_number = self._by_number
        if len(heap.heap) > 2 * len(by_number) + COMPACT_SLACK:  # else no rebuild: no closure
            heap.compact(len(by_number),
                         lambda: [(h.deadline, n) for n, h in by_number.items()])
        return hold

    def notify(self, key: Hashable) -> list[Hold[T]]:
        """Remove and return every hold of ``key``, oldest first."""
        holds = self._by_key.pop(key, None)
        if not holds:
            return []
        by_number = self._by_number
        by_owner = self._by_owner
        for number, hold in holds.items():
            del by_number[number]
            owner = hold.owner
            if owner is not None:  # `_drop_from_owner`, inlined: this runs per hold
                mine = by_owner[owner]
                del mine[number]
                if not mine:
                    del by_owner[owner]
        return list(holds.values())

    def expire(self, now: float) -> list[Hold[T]]:
        """Remove and return every hold whose deadline is at or before ``now``."""
        return self._heap.pop_due(now, self._take)

    def remove(self, hold: Hold[T]) -> bool:
        """Remove ``hold`` if it is still held (its requester went away)."""
        if self._by_number.pop(hold.number, None) is None:
            return False
        self._drop_from_key(hold)
        self._drop_from_owner(hold)
        return True

    def remove_owner(self, owner: Hashable) -> list[Hold[T]]:
        """Remove and return every hold of ``owner``, oldest first."""
        holds = self._by_owner.pop(owner, None)
        if not holds:
            return []
        by_number = self._by_number
        for hold in holds.values():
            del by_number[hold.number]
            self._drop_from_key(hold)
        return list(holds.values())

    def next_deadline(self) -> float | None:
        """Return the earliest deadline of a hold still held, or None."""
        return self._heap.next_deadline(self._live)

    def _take(self, number: int, deadline: float) -> Hold[T] | None:
        hold = self._by_number.pop(number, None)
        if hold is not None:
            self._drop_from_key(hold)
            self._drop_from_owner(hold)
        return hold

    def _live(self, number: int, deadline: float) -> bool:
        return number in self._by_number

    def _drop_from_key(self, hold: Hold[T]) -> None:
        holds = self._by_key[hold.key]
        del holds[hold.number]
        if not holds:
            del self._by_key[hold.key]

    def _drop_from_owner(self, hold: Hold[T]) -> None:
        if hold.owner is None:
            return
        holds = self._by_owner[hold.owner]
        del holds[hold.number]
        if not holds:
            del self._by_owner[hold.owner]
