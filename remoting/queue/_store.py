"""`TopicStore`: a topic's records, the newest in memory, and all of them in segment files
when the service has a data directory (NSQ's memory queue overflowing to its disk queue,
RocketMQ's commit log).

Theory of operation (the service's loop thread):
- Offsets ``earliest`` to ``end - 1`` are held. Memory holds the newest of them, offsets
  ``memory_base`` to ``end - 1``, in a list read by index (O(1)).
- With a `SegmentLog`, every record is also written to disk as it is appended, and memory
  keeps at most ``memory_messages`` of the newest (a read cache: older ones are read from the
  segments). A read of those on the loop takes them from the page cache or not at all
  (``nowait``); `read_async` reads what needs the disk in a worker thread, so a slow disk
  or a consumer far behind never stalls the loop.
- Memory is bounded by ``memory_bytes`` too (large messages): with a log, the oldest records
  leave memory past it; without one, memory is the only copy: a publish that would hold more
  than ``memory_messages`` or ``memory_bytes`` is refused (`has_room`), and records leave
  only when every consumer is done with them (`trim`).
- Every store of a service counts its bytes in memory in one `MemoryBudget`, the service's
  total: without a log a publish past it is refused (`has_room`); with one, the service
  takes memory back from the caches of the topics written least recently (`evict`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._sansio._records import record_offset
from ._segments import NO_BYTE_LIMIT, read_spans

if TYPE_CHECKING:
    from ._segments import SegmentLog

__all__ = ["MemoryBudget", "TopicStore"]


class MemoryBudget:
    """Bytes of messages every topic of a service holds in memory, against its total."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int = NO_BYTE_LIMIT) -> None:
        self.limit = limit
        self.used = 0

    def fits(self, size: int) -> bool:
        """True if ``size`` more bytes stay within the total."""
        return self.used + size <= self.limit

    @property
    def over(self) -> int:
        """Bytes past the total (0 or less: within it)."""
        return self.used - self.limit


class TopicStore:
    """The records of one topic (see the module docstring)."""

    def __init__(self, memory_messages: int, log: SegmentLog | None,
                 memory_bytes: int = NO_BYTE_LIMIT, budget: MemoryBudget | None = None
                 ) -> None:
        self.memory_messages = memory_messages
        self.memory_bytes = memory_bytes
        self.memory_size = 0  # bytes of the records in memory
        self.budget = MemoryBudget() if budget is None else budget
        self.log = log
        self.end = log.end if log is not None else 0
        self.earliest = log.earliest if log is not None else 0
        self._memory: list[bytes] = []
        self._head = 0  # index in _memory of the record at memory_base
        self.memory_base = self.end
        self.disk_reads = 0  # reads that needed the disk (made in a worker thread)

    @property
    def retained(self) -> int:
        """How many offsets are held (gaps left by corruption included)."""
        return self.end - self.earliest

    @property
    def in_memory(self) -> int:
        """How many records are in memory."""
        return len(self._memory) - self._head

    def has_room(self, count: int, size: int) -> bool:
        """True if ``count`` more records of ``size`` bytes in all may be appended (always,
        with a data directory): within this topic's bounds and the service's total."""
        return self.log is not None or (self.retained + count <= self.memory_messages
                                        and self.memory_size + size <= self.memory_bytes
                                        and self.budget.fits(size))

    def append(self, records: list[bytes]) -> int:
        """Append ``records``; return the offset of the first."""
        first = self.end
        if self.log is not None:
            self.log.append(records, first)
        self._memory += records
        size = sum(map(len, records))
        self.memory_size += size
        self.budget.used += size
        self.end += len(records)
        if self.log is not None:  # memory is a cache: the oldest go past either bound
            over = self.in_memory - self.memory_messages
            if self.memory_size > self.memory_bytes:
                over = max(over, self._past_bytes())
            self._drop_memory(over)
        return first

    def _past_bytes(self) -> int:
        """How many of the oldest records in memory to drop to be within ``memory_bytes``
        (all but the newest at most)."""
        excess = self.memory_size - self.memory_bytes
        memory = self._memory
        count = 0
        for i in range(self._head, len(memory) - 1):
            if excess <= 0:
                break
            excess -= len(memory[i])
            count += 1
        return count

    def read(self, offset: int, max_count: int, max_bytes: int = NO_BYTE_LIMIT, *,
             nowait: bool = False) -> list[bytes] | None:
        """Return up to ``max_count`` records from ``offset`` on (from ``earliest`` if below
        it), stepping over gaps, and none that would pass ``max_bytes`` in all but the
        first. With ``nowait``, return None instead if that needs the disk (records older
        than memory holds, not in the page cache): see `read_async`.

        Raises:
            OSError: a segment could not be read.
        """
        offset = max(offset, self.earliest)
        records: list[bytes] = []
        base = self.memory_base
        if offset < base and self.log is not None:
            found = self.log.read(offset, min(max_count, base - offset), max_bytes, nowait,
                                  until=base)
            if found is None:
                return None
            if found and record_offset(found[-1]) != base - 1:
                return found  # stopped before memory's records (a bound): a short answer
            records = found
            offset = base
        if len(records) < max_count and offset < self.end:
            self._from_memory(offset, max_count, max_bytes, records)
        return records

    async def read_async(self, offset: int, max_count: int, max_bytes: int,
                         limiter: trio.CapacityLimiter) -> list[bytes]:
        """`read`, with what is not in memory or the page cache read in a worker thread
        (under ``limiter``): the loop never waits for the disk. What follows the records
        read so is added if it is in memory; a short answer is an answer (ask again).

        Raises:
            OSError: a segment could not be read.
        """
        records = self.read(offset, max_count, max_bytes, nowait=True)
        if records is not None:
            return records
        assert self.log is not None  # only segments make a read wait
        offset = max(offset, self.earliest)
        base = self.memory_base
        count = min(max_count, base - offset)
        spans = self.log.plan(offset, count)
        self.disk_reads += 1
        records = await trio.to_thread.run_sync(read_spans, spans, offset, base, count,
                                                max_bytes, False, limiter=limiter) or []
        # memory's records follow if the read reached them and memory still holds them
        reached = not records or record_offset(records[-1]) == base - 1
        if reached and len(records) < max_count and self.memory_base == base < self.end:
            self._from_memory(base, max_count, max_bytes, records)
        return records

    def _from_memory(self, offset: int, max_count: int, max_bytes: int,
                     records: list[bytes]) -> None:
        """Add the records from ``offset`` (in memory) to ``records``, within the bounds."""
        start = self._head + offset - self.memory_base
        wanted = self._memory[start:start + max_count - len(records)]
        if max_bytes >= NO_BYTE_LIMIT:
            records += wanted
            return
        size = sum(map(len, records))
        for record in wanted:
            size += len(record)
            if records and size > max_bytes:
                return
            records.append(record)

    def trim(self, floor: int) -> None:
        """Let go of the records below ``floor`` (no consumer needs them any more)."""
        if floor <= self.earliest:
            return
        if self.log is not None:
            self.log.delete_below(floor)
            self.earliest = self.log.earliest
            return
        self._drop_memory(min(floor, self.end) - self.memory_base)
        self.earliest = self.memory_base

    def expire(self, written_before: float | None, max_bytes: int | None) -> int:
        """Let go of the oldest segments by retention (`SegmentLog.delete_expired`), whoever
        still needs their records; return the new ``earliest`` (unchanged without a log).

        Raises:
            OSError: a segment file could not be deleted.
        """
        if self.log is None or (written_before is None and max_bytes is None):
            return self.earliest
        if self.log.delete_expired(written_before, max_bytes):
            self.earliest = self.log.earliest
            if self.earliest > self.memory_base:  # memory held some of them too
                self._drop_memory(min(self.earliest, self.end) - self.memory_base)
        return self.earliest

    def evict(self, excess: int) -> int:
        """Drop the oldest records from memory (only with a log: they stay on disk) until
        ``excess`` bytes are freed or memory is empty; return the bytes freed."""
        if self.log is None or excess <= 0:
            return 0
        memory = self._memory
        freed = count = 0
        for i in range(self._head, len(memory)):
            if freed >= excess:
                break
            freed += len(memory[i])
            count += 1
        self._drop_memory(count)
        return freed

    def _drop_memory(self, count: int) -> None:
        if count <= 0:
            return
        memory = self._memory
        dropped = sum(map(len, memory[self._head:self._head + count]))
        self.memory_size -= dropped
        self.budget.used -= dropped
        self._head += count
        self.memory_base += count
        if self._head > 4096 and self._head * 2 > len(self._memory):
            del self._memory[:self._head]
            self._head = 0
