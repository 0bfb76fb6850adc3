"""`TopicStore`: a topic's records, the newest in memory, and all of them in segment files
when the service has a data directory (NSQ's memory queue overflowing to its disk queue,
RocketMQ's commit log).

Theory of operation (the service's loop thread):
- Offsets ``earliest`` to ``end - 1`` are held. Memory holds the newest of them, offsets
  ``memory_base`` to ``end - 1``, in a list read by index (O(1)).
- With a `SegmentLog`, every record is also written to disk as it is appended, and memory
  keeps at most ``memory_messages`` of the newest (a read cache: older ones are read from the
  segments). Without one, memory is the only copy: a publish that would hold more than
  ``memory_messages`` is refused (`has_room`), and records leave only when every consumer is
  done with them (`trim`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._segments import SegmentLog

__all__ = ["TopicStore"]


class TopicStore:
    """The records of one topic (see the module docstring)."""

    def __init__(self, memory_messages: int, log: SegmentLog | None) -> None:
        self.memory_messages = memory_messages
        self.log = log
        self.end = log.end if log is not None else 0
        self.earliest = log.earliest if log is not None else 0
        self._memory: list[bytes] = []
        self._head = 0  # index in _memory of the record at memory_base
        self.memory_base = self.end

    @property
    def retained(self) -> int:
        """How many offsets are held (gaps left by corruption included)."""
        return self.end - self.earliest

    @property
    def in_memory(self) -> int:
        """How many records are in memory."""
        return len(self._memory) - self._head

    def has_room(self, count: int) -> bool:
        """True if ``count`` more records may be appended (always, with a data directory)."""
        return self.log is not None or self.retained + count <= self.memory_messages

    def append(self, records: list[bytes]) -> int:
        """Append ``records``; return the offset of the first."""
        first = self.end
        if self.log is not None:
            self.log.append(records, first)
        self._memory += records
        self.end += len(records)
        if self.log is not None and self.in_memory > self.memory_messages:
            self._drop_memory(self.in_memory - self.memory_messages)
        return first

    def read(self, offset: int, max_count: int) -> list[bytes]:
        """Return up to ``max_count`` records from ``offset`` on (from ``earliest`` if below
        it), stepping over gaps."""
        offset = max(offset, self.earliest)
        records: list[bytes] = []
        if offset < self.memory_base and self.log is not None:
            records = self.log.read(offset, min(max_count, self.memory_base - offset))
            offset = self.memory_base
        if len(records) < max_count and offset < self.end:
            start = self._head + offset - self.memory_base
            records += self._memory[start:start + max_count - len(records)]
        return records

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

    def _drop_memory(self, count: int) -> None:
        if count <= 0:
            return
        self._head += count
        self.memory_base += count
        if self._head > 4096 and self._head * 2 > len(self._memory):
            del self._memory[:self._head]
            self._head = 0
