"""`DeferredOffsets`: a topic's messages published with a ``defer``, until they are due (NSQ's
deferred queue, over a log).

Theory of operation (sync, takes ``now``, no I/O):
- A publish with a ``defer`` adds its offsets (consecutive) with one due time. Until then a
  channel must not deliver them (`get`), and a pull, which reads in offset order, stops at
  the first of them (`first_pending`).
- `release` forgets the offsets whose time came, and says how many: the caller wakes what
  waits for them. A released offset is an ordinary message.
- Every operation is O(log n) in the batches held (or O(count) for the offsets a batch
  adds or releases): two lazy heaps of batches, one by due time, one by first offset. The
  second's top is dropped once due (`first_pending`); nothing else is ever scanned, so a
  million deferred messages cost a pull or the service's timer nothing more than a few.
- A pull from an offset past a batch still pending (a reader by offsets, as Spark's source,
  behind no channel) must not be held back by it: `first_pending(now, start)` then looks the
  first pending batch from ``start`` on up in a list of batches sorted by first offset
  (offsets are given out in order, so batches are appended in order), skipping released ones;
  released batches are dropped from that list once they are half of it.
- Channels keep no copy of what is deferred (a copy per channel cost 128 bytes a message per
  channel: 550,000 deferred messages and 200 channels held 336 MB). A channel's cursor
  passes a pending batch in one step (`pending_end`) and keeps nothing of it; released
  batches are also appended to a log (`released_at`, from `released_base` to
  `released_end`) that each channel reads in order: a batch released below a channel's
  cursor is one it passed while pending, and it delivers it from there. The topic forgets
  the log's entries every channel has read (`forget_released`).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterator, Mapping
from typing import Final

__all__ = ["DeferredOffsets"]

_AFTER_ALL: Final = 1 << 63  # an end past every offset, to bisect by first offset alone


class DeferredOffsets(Mapping[int, float]):
    """Offsets not to deliver before their due time (a mapping of offset -> due time)."""

    __slots__ = ("_by_due", "_by_offset", "_due", "_in_order", "_released", "_released_log",
                 "released_base")

    def __init__(self) -> None:
        self._due: dict[int, float] = {}
        self._by_due: list[tuple[float, int, int]] = []  # (due, first, count)
        self._by_offset: list[tuple[int, float]] = []  # (first, due), dropped once due
        self._in_order: list[tuple[int, int, float]] = []  # (first, end, due), by first
        self._released = 0  # batches of _in_order released since it was last compacted
        self._released_log: list[tuple[int, int]] = []  # (first, end), in release order
        self.released_base = 0  # the index of _released_log[0] in the log since the start

    def __getitem__(self, offset: int) -> float:
        return self._due[offset]

    def __iter__(self) -> Iterator[int]:
        return iter(self._due)

    def __len__(self) -> int:
        return len(self._due)

    def get(self, offset: int, default: float | None = None) -> float | None:  # type: ignore[override]
        """Return when ``offset`` is due (``default`` if it is not deferred)."""
        return self._due.get(offset, default)

    def add(self, first: int, count: int, due: float) -> None:
        """Defer the ``count`` offsets from ``first`` until ``due``."""
        due_of = self._due
        for offset in range(first, first + count):
            due_of[offset] = due
        heapq.heappush(self._by_due, (due, first, count))
        heapq.heappush(self._by_offset, (first, due))
        batch = (first, first + count, due)
        if self._in_order and self._in_order[-1][0] > first:
            bisect.insort(self._in_order, batch)  # not given out in order: still correct
        else:
            self._in_order.append(batch)

    def release(self, now: float) -> int:
        """Forget the offsets due at ``now``; return how many."""
        return sum(count for _, count in self.release_batches(now))

    def release_batches(self, now: float) -> list[tuple[int, int]]:
        """Forget the offsets due at ``now``; return the batches they were added in, as
        ``(first, count)`` (what waits for one of their offsets may go on)."""
        by_due = self._by_due
        due_of = self._due
        batches: list[tuple[int, int]] = []
        while by_due and by_due[0][0] <= now:
            _, first, count = heapq.heappop(by_due)
            self._released += 1
            released = 0
            for offset in range(first, first + count):
                if due_of.pop(offset, None) is not None:
                    released += 1
            if released:
                batches.append((first, count))
                self._released_log.append((first, first + count))
        if self._released * 2 > len(self._in_order):
            self._in_order = [b for b in self._in_order if b[2] > now]
            self._released = 0
        return batches

    @property
    def released_end(self) -> int:
        """The index the next released batch gets in the log of released batches."""
        return self.released_base + len(self._released_log)

    def released_at(self, index: int) -> tuple[int, int]:
        """Return the released batch at ``index`` of the log, as ``(first, end)``."""
        return self._released_log[index - self.released_base]

    def forget_released(self, below: int) -> None:
        """Forget the log's released batches before index ``below`` (all readers read them)."""
        cut = min(below - self.released_base, len(self._released_log))
        if cut > 0:
            del self._released_log[:cut]
            self.released_base += cut

    def pending_end(self, offset: int) -> int | None:
        """Return the end of the batch ``offset`` belongs to if it is not released yet
        (deferred, due or not: a channel passes the batch then), else None."""
        if offset not in self._due:
            return None
        in_order = self._in_order
        first, end, _ = in_order[bisect.bisect_right(in_order, (offset, _AFTER_ALL, 0.0)) - 1]
        return end

    def lowest_pending(self, start: int, stop: int) -> int | None:
        """Return the lowest offset from ``start`` to below ``stop`` not released yet."""
        in_order = self._in_order
        i = max(bisect.bisect_right(in_order, (start, _AFTER_ALL, 0.0)) - 1, 0)
        for first, end, _ in itertools.islice(in_order, i, None):
            if first >= stop:
                break
            low = max(first, start)
            if low < end and low in self._due:
                return low
        return None

    def pending_between(self, start: int, stop: int) -> int:
        """Return how many offsets from ``start`` to below ``stop`` are not released yet
        (O(1) when the range holds them all, as a channel's usually does)."""
        in_order = self._in_order
        if not self._due:
            return 0
        if start <= in_order[0][0] and stop >= in_order[-1][1]:
            return len(self._due)
        i = max(bisect.bisect_right(in_order, (start, _AFTER_ALL, 0.0)) - 1, 0)
        count = 0
        for first, end, _ in itertools.islice(in_order, i, None):
            if first >= stop:
                break
            low, high = max(first, start), min(end, stop)
            if low < high and low in self._due:
                count += high - low
        return count

    def next_due(self) -> float | None:
        """Return when `release` next has something to do (None: nothing is deferred)."""
        return self._by_due[0][0] if self._by_due else None

    def first_pending(self, now: float, start: int = 0) -> int | None:
        """Return the lowest offset from ``start`` on not due at ``now`` (None: none)."""
        by_offset = self._by_offset
        while by_offset and by_offset[0][1] <= now:
            heapq.heappop(by_offset)
        if not by_offset or by_offset[0][0] >= start:  # the usual case: nothing to look up
            return by_offset[0][0] if by_offset else None
        in_order = self._in_order
        i = bisect.bisect_right(in_order, (start, _AFTER_ALL, 0.0)) - 1
        for first, end, due in itertools.islice(in_order, max(i, 0), None):
            if end > start and due > now:
                return max(first, start)
        return None
