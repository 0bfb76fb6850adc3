"""`Topic` and `Channel`: a topic's log and what its consumers have done with it.

Theory of operation (the service's loop thread):
- A topic is one ordered log (`TopicStore`): offsets 0, 1, 2... in publish order. Publishing
  appends; deferred messages are appended at once too, and remembered (``deferred``, a
  `DeferredOffsets`: offset -> when due, on the loop's clock) until due.
- A channel (NSQ) receives a copy of every message: it is a `ChannelQueue` over the log, and
  its consumers compete for the messages. A new channel starts at the earliest message the
  topic still holds.
- A group (RocketMQ's consumer group) is an offset committed by pull consumers: the next one
  to read. A group that never committed reads from the earliest message held.
- The ``floor`` is the lowest offset any channel or group still needs; below it the topic may
  let records go (`trim`). A topic that no channel or group reads keeps everything.
- Subscription tasks waiting for messages park in ``waiting`` (a `trio.lowlevel.ParkingLot`):
  a publish, a requeue, a timeout or a deferred message coming due unparks them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._messaging._channel_queue import ChannelQueue
from .._messaging._dedup import KeyWindow
from .._messaging._deferred import DeferredOffsets
from .._messaging._records import build_record, record_offset

if TYPE_CHECKING:
    from ._store import TopicStore

__all__ = ["Channel", "Topic"]


class Channel:
    """One channel of a topic: its delivery state and its consumers."""

    __slots__ = ("consumers", "name", "queue")

    def __init__(self, name: str, queue: ChannelQueue) -> None:
        self.name = name
        self.queue = queue
        self.consumers: set[int] = set()


class Topic:
    """One topic: its store, channels, groups, deferred messages and recent keys."""

    def __init__(self, name: str, store: TopicStore, *, msg_timeout: float, max_attempts: int,
                 dedup_window: float) -> None:
        self.name = name
        self.store = store
        self.msg_timeout = msg_timeout
        self.max_attempts = max_attempts
        self.channels: dict[str, Channel] = {}
        self.groups: dict[str, int] = {}
        self.deferred = DeferredOffsets()
        self.keys = KeyWindow(dedup_window)
        self.waiting = trio.lowlevel.ParkingLot()
        self.published = 0
        self.duplicates = 0
        # the last pull answer's key and body (see `_handlers._pulled`)
        self.pull_cache: tuple[tuple[int, ...], bytes | None] | None = None

    @property
    def end(self) -> int:
        """The offset the next message gets."""
        return self.store.end

    def channel(self, name: str, start: int | None = None) -> Channel:
        """Return the channel ``name``, made if new (at ``start``, or the earliest held)."""
        found = self.channels.get(name)
        if found is None:
            earliest, end = self.store.earliest, self.store.end
            begin = earliest if start is None else min(max(start, earliest), end)
            found = self.channels[name] = Channel(name, ChannelQueue(
                begin, msg_timeout=self.msg_timeout, max_attempts=self.max_attempts))
        return found

    def append(self, contents: list[bytes], now: float, now_ms: int, defer: float,
               key: str | None) -> int:
        """Append one publish's messages; return the first offset."""
        first = self.store.end
        deliver_at = now_ms + int(defer * 1000) if defer > 0 else 0
        records = [build_record(first + i, now_ms, deliver_at, content,
                                key if i == 0 else None, len(contents) if i == 0 else 0)
                   for i, content in enumerate(contents)]
        self.store.append(records)
        if defer > 0:
            self.deferred.add(first, len(records), now + defer)
        if key is not None:
            self.keys.add(key, first, len(records), now)
        self.published += len(records)
        self.waiting.unpark_all()
        return first

    def visible_end(self, now: float) -> int:
        """The offset a pull may read up to: the first deferred message not yet due, or the
        end (a pull reads in order, so a deferred message holds back the ones after it)."""
        pending = self.deferred.first_pending(now)
        return self.store.end if pending is None else pending

    def read(self, offsets: list[int]) -> dict[int, bytes]:
        """Return the records of ``offsets`` that are held, by offset (runs read at once)."""
        found: dict[int, bytes] = {}
        store = self.store
        i = 0
        while i < len(offsets):
            start = offsets[i]
            j = i + 1
            while j < len(offsets) and offsets[j] == offsets[j - 1] + 1:
                j += 1
            records = store.read(start, j - i)
            if start >= store.memory_base:  # memory has no gaps: the i-th is start + i
                found.update(zip(range(start, start + len(records)), records, strict=False))
            else:
                for record in records:
                    offset = record_offset(record)
                    if offset > offsets[j - 1]:
                        break
                    found[offset] = record
            i = j
        return found

    def floor(self) -> int | None:
        """The lowest offset a channel or a group still needs (None: nobody reads)."""
        needs = [c.queue.floor() for c in self.channels.values()]
        needs += self.groups.values()
        return min(needs) if needs else None

    def trim(self) -> None:
        """Let go of what no channel or group needs any more."""
        floor = self.floor()
        if floor is not None:
            self.store.trim(floor)
