"""`InFlight`: the messages delivered to consumers and not yet acknowledged (NSQ's in-flight
queue), with their deadlines.

Theory of operation (sync, takes ``now``, no I/O):
- An entry is one delivery of one message (by offset) to one consumer, with the deadline by
  which the consumer must finish, requeue or touch it, and the attempt number it carries.
- An offset is in flight at most once. Whoever removes an entry (`pop`, `expire`,
  `pop_consumer`) decides what happens to the message next; the table only forgets it.
- Only the consumer that holds an entry may remove or touch it: `pop` and `touch` from
  another consumer change nothing (a foreign acknowledgement is refused, not applied).
- Entries are indexed by offset (``entries``) and by consumer (``by_consumer``: the offsets
  each holds), so a consumer that goes away costs what it held (`pop_consumer`), not a walk
  over every delivery of the channel: a connection closing with a thousand subscriptions
  would otherwise walk the channel's table a thousand times.
- Deadlines sit in a `LazyDeadlines` heap of ``(deadline, offset)``: an entry touched or
  removed leaves a stale pair, skipped when met and dropped when the heap is rebuilt (checked
  whenever entries are added, touched or removed in a batch, so a consumer that leaves with
  thousands does not leave them for one `next_deadline` to pop one by one).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from ..._core._sansio._deadlines import COMPACT_SLACK, LazyDeadlines

if TYPE_CHECKING:
    from collections.abc import Hashable

__all__ = ["InFlight", "InFlightEntry"]


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
    """Deliveries awaiting acknowledgement, by offset and by consumer."""

    __slots__ = ("_deadlines", "by_consumer", "entries")

    def __init__(self) -> None:
        # read them freely; change them only through the methods below
        self.entries: dict[int, InFlightEntry] = {}
        self.by_consumer: dict[Hashable, set[int]] = {}  # the offsets each consumer holds
        self._deadlines = LazyDeadlines[int]()

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, offset: int) -> bool:
        return offset in self.entries

    @property
    def per_consumer(self) -> dict[Hashable, int]:
        """How many entries each consumer holds."""
        return {consumer: len(offsets) for consumer, offsets in self.by_consumer.items()}

    def holder(self, offset: int) -> Hashable | None:
        """Return the consumer holding ``offset``, or None if it is not in flight."""
        entry = self.entries.get(offset)
        return None if entry is None else entry.consumer

    def add(self, offset: int, consumer: Hashable, deadline: float, attempts: int) -> None:
        """Record the delivery of ``offset`` to ``consumer``.

        Raises:
            ValueError: ``offset`` is already in flight (a message is delivered once at a time).
        """
        self.add_many([(offset, attempts)], consumer, deadline)

    def add_many(self, deliveries: list[tuple[int, int]], consumer: Hashable,
                 deadline: float) -> None:
        """`add` each (offset, attempt) of ``deliveries`` for ``consumer``, with one deadline
        (a batch delivered at once: the per-message path, kept lean).

        Raises:
            ValueError: an offset is already in flight; those before it were added.
        """
        entries = self.entries
        heap = self._deadlines.heap
        push = heapq.heappush
        mine = self.by_consumer.get(consumer)
        if mine is None:
            mine = self.by_consumer[consumer] = set()
        hold = mine.add
        try:
            for offset, attempts in deliveries:
                if offset in entries:
                    raise ValueError(f"offset {offset} is already in flight")
                entries[offset] = InFlightEntry(offset, consumer, deadline, attempts)
                hold(offset)
                push(heap, (deadline, offset))
        finally:
            if not mine:
                del self.by_consumer[consumer]
        self._compact()

    def pop_many(self, offsets: list[int], consumer: Hashable) -> list[int]:
        """`pop` each of ``offsets`` held by ``consumer``; return those it did not hold
        (unknown or foreign: left as they were)."""
        entries = self.entries
        mine = self.by_consumer.get(consumer)
        if mine is None:
            return list(offsets)
        refused: list[int] = []
        forget = mine.remove
        for offset in offsets:
            try:
                forget(offset)  # one set operation: the usual case is held
            except KeyError:
                refused.append(offset)
            else:
                del entries[offset]
        if not mine:
            del self.by_consumer[consumer]
        self._compact()
        return refused

    def pop(self, offset: int, consumer: Hashable) -> InFlightEntry | None:
        """Remove and return ``offset``'s entry if ``consumer`` holds it, else None (unknown,
        or held by another consumer: nothing changes)."""
        entry = self.entries.get(offset)
        if entry is None or entry.consumer != consumer:
            return None
        del self.entries[offset]
        self._forget(consumer, offset)
        return entry

    def touch(self, offset: int, consumer: Hashable, deadline: float) -> bool:
        """Move the deadline of ``offset`` to ``deadline`` if ``consumer`` holds it."""
        entry = self.entries.get(offset)
        if entry is None or entry.consumer != consumer:
            return False
        entry.deadline = deadline
        self._deadlines.push(deadline, offset)
        self._compact()
        return True

    def expire(self, now: float) -> list[InFlightEntry]:
        """Remove and return every entry whose deadline is at or before ``now``, earliest
        first."""
        return self._deadlines.pop_due(now, self._take)

    def next_deadline(self) -> float | None:
        """Return the earliest deadline of an entry still in flight, or None."""
        return self._deadlines.next_deadline(self._live)

    def pop_consumer(self, consumer: Hashable) -> list[InFlightEntry]:
        """Remove and return every entry ``consumer`` holds (it is gone), by offset: the
        cost of what it held."""
        mine = self.by_consumer.pop(consumer, None)
        if not mine:
            return []
        entries = self.entries
        gone = [entries.pop(offset) for offset in sorted(mine)]
        self._compact()  # their heap pairs are stale: never more than the live ones by much
        return gone

    def _take(self, offset: int, deadline: float) -> InFlightEntry | None:
        entry = self.entries.get(offset)
        if entry is None or entry.deadline != deadline:
            return None
        del self.entries[offset]
        self._forget(entry.consumer, offset)
        return entry

    def _live(self, offset: int, deadline: float) -> bool:
        entry = self.entries.get(offset)
        return entry is not None and entry.deadline == deadline

    def _forget(self, consumer: Hashable, offset: int) -> None:
        mine = self.by_consumer[consumer]
        mine.remove(offset)
        if not mine:
            del self.by_consumer[consumer]

    def _compact(self) -> None:
        entries = self.entries
        if len(self._deadlines) > 2 * len(entries) + COMPACT_SLACK:  # checked here: per batch
            self._deadlines.compact(len(entries),
                                    lambda: [(e.deadline, o) for o, e in entries.items()])
