"""`InFlight`: the messages delivered to consumers and not yet acknowledged (NSQ's in-flight
queue), with their deadlines.

Theory of operation (sync, takes ``now``, no I/O):
- An entry is one delivery of one message (by offset) to one consumer, with the deadline by
  which the consumer must finish, requeue or touch it, and the attempt number it carries.
- An offset is in flight at most once. Whoever removes an entry (`pop`, `expire`,
  `pop_consumer`) decides what happens to the message next; the table only forgets it.
- Only the consumer that holds an entry may remove or touch it: `pop` and `touch` from
  another consumer change nothing (a foreign acknowledgement is refused, not applied).
- Deadlines sit in a lazy heap of ``(deadline, offset)``: an entry touched or removed leaves a
  stale heap item, skipped when met and dropped when the heap is rebuilt (at more than twice
  the live entries plus `_COMPACT_SLACK`), as `ResponseTable` does.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Hashable

__all__ = ["InFlight", "InFlightEntry"]

_COMPACT_SLACK: Final = 1024


class InFlightEntry:
    """One delivery: ``offset`` held by ``consumer`` until ``deadline``, attempt ``attempts``."""

    __slots__ = ("attempts", "consumer", "deadline", "offset")

    def __init__(self, offset: int, consumer: Hashable, deadline: float, attempts: int) -> None:
        self.offset = offset
        self.consumer = consumer
        self.deadline = deadline
        self.attempts = attempts

    def __repr__(self) -> str:
        return (f"InFlightEntry(offset={self.offset}, consumer={self.consumer!r}, "
                f"deadline={self.deadline}, attempts={self.attempts})")


class InFlight:
    """Deliveries awaiting acknowledgement, by offset."""

    __slots__ = ("_heap", "entries", "per_consumer")

    def __init__(self) -> None:
        self.entries: dict[int, InFlightEntry] = {}
        self.per_consumer: dict[Hashable, int] = {}  # entries held, by consumer
        self._heap: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, offset: int) -> bool:
        return offset in self.entries

    def holder(self, offset: int) -> Hashable | None:
        """Return the consumer holding ``offset``, or None if it is not in flight."""
        entry = self.entries.get(offset)
        return None if entry is None else entry.consumer

    def add(self, offset: int, consumer: Hashable, deadline: float, attempts: int) -> None:
        """Record the delivery of ``offset`` to ``consumer``.

        Raises:
            ValueError: ``offset`` is already in flight (a message is delivered once at a time).
        """
        entries = self.entries
        if offset in entries:
            raise ValueError(f"offset {offset} is already in flight")
        entries[offset] = InFlightEntry(offset, consumer, deadline, attempts)
        per = self.per_consumer
        per[consumer] = per.get(consumer, 0) + 1
        heapq.heappush(self._heap, (deadline, offset))
        self._compact()

    def add_many(self, deliveries: list[tuple[int, int]], consumer: Hashable,
                 deadline: float) -> None:
        """`add` each (offset, attempt) of ``deliveries`` for ``consumer``, with one deadline
        (a batch delivered at once: the per-message path, kept lean)."""
        entries = self.entries
        heap = self._heap
        push = heapq.heappush
        for offset, attempts in deliveries:
            if offset in entries:
                raise ValueError(f"offset {offset} is already in flight")
            entries[offset] = InFlightEntry(offset, consumer, deadline, attempts)
            push(heap, (deadline, offset))
        per = self.per_consumer
        per[consumer] = per.get(consumer, 0) + len(deliveries)
        self._compact()

    def pop_many(self, offsets: list[int], consumer: Hashable) -> list[int]:
        """`pop` each of ``offsets`` held by ``consumer``; return those it did not hold
        (unknown or foreign: left as they were)."""
        entries = self.entries
        refused: list[int] = []
        popped = 0
        for offset in offsets:
            entry = entries.get(offset)
            if entry is None or entry.consumer != consumer:
                refused.append(offset)
            else:
                del entries[offset]
                popped += 1
        if popped:
            per = self.per_consumer
            left = per[consumer] - popped
            if left:
                per[consumer] = left
            else:
                del per[consumer]
        return refused

    def pop(self, offset: int, consumer: Hashable) -> InFlightEntry | None:
        """Remove and return ``offset``'s entry if ``consumer`` holds it, else None (unknown,
        or held by another consumer: nothing changes)."""
        entry = self.entries.get(offset)
        if entry is None or entry.consumer != consumer:
            return None
        del self.entries[offset]
        self._forget(consumer)
        return entry

    def touch(self, offset: int, consumer: Hashable, deadline: float) -> bool:
        """Move the deadline of ``offset`` to ``deadline`` if ``consumer`` holds it."""
        entry = self.entries.get(offset)
        if entry is None or entry.consumer != consumer:
            return False
        entry.deadline = deadline
        heapq.heappush(self._heap, (deadline, offset))
        self._compact()
        return True

    def expire(self, now: float) -> list[InFlightEntry]:
        """Remove and return every entry whose deadline is at or before ``now``, earliest
        first."""
        heap = self._heap
        entries = self.entries
        expired: list[InFlightEntry] = []
        while heap and heap[0][0] <= now:
            deadline, offset = heapq.heappop(heap)
            entry = entries.get(offset)
            if entry is not None and entry.deadline == deadline:
                del entries[offset]
                self._forget(entry.consumer)
                expired.append(entry)
        return expired

    def next_deadline(self) -> float | None:
        """Return the earliest deadline of an entry still in flight, or None."""
        heap = self._heap
        entries = self.entries
        while heap:
            deadline, offset = heap[0]
            entry = entries.get(offset)
            if entry is not None and entry.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def pop_consumer(self, consumer: Hashable) -> list[InFlightEntry]:
        """Remove and return every entry ``consumer`` holds (it is gone), by offset."""
        gone = sorted((e for e in self.entries.values() if e.consumer == consumer),
                      key=lambda e: e.offset)
        for entry in gone:
            del self.entries[entry.offset]
        self.per_consumer.pop(consumer, None)
        return gone

    def _forget(self, consumer: Hashable) -> None:
        per = self.per_consumer
        left = per[consumer] - 1
        if left:
            per[consumer] = left
        else:
            del per[consumer]

    def _compact(self) -> None:
        if len(self._heap) > 2 * len(self.entries) + _COMPACT_SLACK:
            self._heap = [(e.deadline, o) for o, e in self.entries.items()]
            heapq.heapify(self._heap)
