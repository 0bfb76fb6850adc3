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
- Pulls with nothing to read are held under ``(topic, offset)``: the offset they read from,
  which is the topic's end (they wait for a publish) or a deferred message not yet due (they
  wait for it). ``held_at`` lists those offsets, so a publish wakes the pulls at its first
  offset, and a deferred batch coming due those at its offsets, and no other.
- ``incarnation`` names this log: made when the topic is made (kept in the topic's
  directory with a data directory, so it survives restarts), it changes when the log starts
  afresh (a memory-only service restarted), so a reader holding offsets knows they are of
  another log.
- ``timer`` is the topic's key in the service's `DeadlineHeap`, and each channel's its own:
  the service's timer visits only what is due.
"""

from __future__ import annotations

import bisect
import uuid
from typing import TYPE_CHECKING, Final

import trio

from .._core._sansio._deadlines import new_key
from ._sansio._channel_queue import ChannelQueue
from ._sansio._dedup import KeyWindow
from ._sansio._deferred import DeferredOffsets
from ._sansio._records import build_record, record_offset

if TYPE_CHECKING:
    from ._store import TopicStore

__all__ = ["COLD", "MAX_PULL_BYTES", "Channel", "Cold", "Topic"]

# A pull's answer stops past this many bytes of records (one record at least): well below the
# default 16 MiB frame limit whatever ``max`` and the messages' sizes.
MAX_PULL_BYTES: Final = 4 * 1024 * 1024


class Cold:
    """The answer needs the disk: see `Topic.pull_body_async`."""

    __slots__ = ()


COLD: Final = Cold()


def _run_end(offsets: list[int], i: int) -> int:
    """Return where the run of consecutive offsets starting at ``offsets[i]`` ends."""
    j = i + 1
    while j < len(offsets) and offsets[j] == offsets[j - 1] + 1:
        j += 1
    return j


def _collect(records: list[bytes], first: int, last: int, found: dict[int, bytes]) -> None:
    """Put the records of ``records`` from ``first`` to ``last`` in ``found``, by offset."""
    for record in records:
        offset = record_offset(record)
        if offset > last:
            break
        if offset >= first:
            found[offset] = record


class Channel:
    """One channel of a topic: its delivery state, its consumers, and since when it has had
    none (``idle_since``, on the loop's clock; None while it has some)."""

    __slots__ = ("consumers", "idle_since", "name", "queue", "timer", "topic")

    def __init__(self, name: str, queue: ChannelQueue, topic: Topic) -> None:
        self.name = name
        self.queue = queue
        self.topic = topic
        self.consumers: set[int] = set()
        self.idle_since: float | None = None
        self.timer = new_key()

    def next_due(self, idle_timeout: float | None) -> float | None:
        """When the service's timer has something to do for this channel: a delivery's
        deadline, a message coming due, or its idle time running out (None: nothing)."""
        due = self.queue.next_deadline()
        if idle_timeout is not None and self.idle_since is not None:
            idle = self.idle_since + idle_timeout
            due = idle if due is None else min(due, idle)
        return due


class Topic:
    """One topic: its store, channels, groups, deferred messages and recent keys."""

    def __init__(self, name: str, store: TopicStore, *, msg_timeout: float, max_attempts: int,
                 dedup_window: float, incarnation: str | None = None) -> None:
        self.name = name
        self.store = store
        self.incarnation = uuid.uuid4().hex if incarnation is None else incarnation
        self.timer = new_key()
        self.held_at: set[int] = set()  # offsets where pulls were held, not woken since
        self.msg_timeout = msg_timeout
        self.max_attempts = max_attempts
        self.channels: dict[str, Channel] = {}
        self.groups: dict[str, int] = {}
        self.deferred = DeferredOffsets()
        self.keys = KeyWindow(dedup_window)
        self.waiting = trio.lowlevel.ParkingLot()
        self.published = 0
        self.duplicates = 0
        # counts what a pull's answer depends on changing: appends, trims, deferred messages
        # coming due (the pull cache's key)
        self.changes = 0
        # the last pull answer: (start, count, changes, body) (see `pull_body`)
        self.pull_cache: tuple[int, int, int, bytes | None] | None = None

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
                begin, msg_timeout=self.msg_timeout, max_attempts=self.max_attempts,
                released_seen=self.deferred.released_end), self)
        return found

    def append(self, contents: list[bytes], now: float, now_ms: int, defer: float,
               key: str | None) -> int:
        """Append one publish's messages; return the first offset."""
        first = self.store.end
        deliver_at = now_ms + int(defer * 1000) if defer > 0 else 0
        last = len(contents) - 1  # every record but the last says more follow: a publish
        # cut short by a crash is found whole or dropped at recovery (`scan`)
        records = [build_record(first + i, now_ms, deliver_at, content,
                                key if i == 0 else None, len(contents) if i == 0 else 0,
                                i < last)
                   for i, content in enumerate(contents)]
        self.store.append(records)
        if defer > 0:
            self.deferred.add(first, len(records), now + defer)
        if key is not None:
            self.remember(key, first, len(records), now)
        self.published += len(records)
        self.changes += 1
        self.waiting.unpark_all()
        return first

    def remember(self, key: str, first: int, count: int, now: float) -> None:
        """Remember a publish's key (`KeyWindow.add`), its cost counted in the service's
        memory total."""
        keys = self.keys
        before = keys.bytes
        keys.add(key, first, count, now)
        self.store.budget.used += keys.bytes - before

    def forget_keys(self, now: float, excess: int = 0) -> None:
        """Forget the keys past their window, and the oldest until ``excess`` bytes are
        freed (the service is past its memory total), counted in that total."""
        keys = self.keys
        before = keys.bytes
        keys.expire(now)
        if excess > 0:
            keys.shed(excess)
        self.store.budget.used -= before - keys.bytes

    def visible_end(self, now: float, start: int = 0) -> int:
        """The offset a pull from ``start`` may read up to: the first deferred message from
        ``start`` on not yet due, or the end (a pull reads in order, so a deferred message
        holds back the ones after it, not those before)."""
        pending = self.deferred.first_pending(now, start)
        return self.store.end if pending is None else pending

    def read(self, offsets: list[int]) -> dict[int, bytes]:
        """Return the records of ``offsets`` that are held, by offset (runs read at once;
        a read that needs the disk waits for it: for a few records, off the hot path).

        Raises:
            OSError: a segment could not be read.
        """
        found: dict[int, bytes] = {}
        i = 0
        while i < len(offsets):
            j = _run_end(offsets, i)
            records = self.store.read(offsets[i], j - i) or []
            _collect(records, offsets[i], offsets[j - 1], found)
            i = j
        return found

    async def read_some(self, offsets: list[int], max_bytes: int,
                        limiter: trio.CapacityLimiter) -> tuple[int, dict[int, bytes]]:
        """Read the records of the first offsets of ``offsets`` (in order), up to about
        ``max_bytes`` (one record at least), what needs the disk in a worker thread. Return
        how many of ``offsets`` the read covered, and their records that are held (one
        covered and missing is gone: let go of, or in a corrupt segment's gap).

        Raises:
            OSError: a segment could not be read.
        """
        j = _run_end(offsets, 0)
        first, last = offsets[0], offsets[j - 1]
        in_memory = first >= self.store.memory_base  # then read at once, with no gap
        records = await self.store.read_async(first, j, max_bytes, limiter)
        found: dict[int, bytes]
        if in_memory:  # the usual case: the i-th record is first + i
            found = dict(zip(range(first, first + len(records)), records, strict=False))
            return len(records), found
        found = {}
        _collect(records, first, last, found)
        if not records:
            return j, found  # none of them is held any more
        reached = record_offset(records[-1])
        covered = j if reached >= last else bisect.bisect_right(offsets, reached, 0, j)
        return covered, found

    def pull_body(self, start: int, count: int, now: float) -> bytes | None | Cold:
        """Return a pull's answer body: the records from ``start`` (or from the earliest
        held, if ``start`` was let go) up to what is visible (`visible_end`) and
        `MAX_PULL_BYTES`; None if there are none; `COLD` if reading them needs the disk
        (`pull_body_async` does).

        The body is shared by the pulls asking for the same records while the topic does
        not change (``pull_cache``, keyed by ``changes``): a publish that releases thousands
        of held pulls reads and joins the records once, and checks two ints for each of the
        others. (A deferred message counts as changed once released, by the service's
        timer at its due time, which wakes the held pulls again.)
        """
        cached = self.pull_cache
        if (cached is not None and cached[2] == self.changes and cached[0] == start
                and cached[1] == count):
            return cached[3]
        changes = self.changes
        first, wanted = self._pull_range(start, count, now)
        records = self.store.read(first, wanted, MAX_PULL_BYTES, nowait=True) if wanted else []
        if records is None:
            return COLD
        body = b"".join(records) if records else None
        self.pull_cache = (start, count, changes, body)
        return body

    async def pull_body_async(self, start: int, count: int, now: float,
                              limiter: trio.CapacityLimiter) -> bytes | None:
        """`pull_body`, reading what needs the disk in a worker thread.

        Raises:
            OSError: a segment could not be read.
        """
        body = self.pull_body(start, count, now)
        if body is not COLD:
            return body  # type: ignore[return-value]
        changes = self.changes
        first, wanted = self._pull_range(start, count, now)
        records = await self.store.read_async(first, wanted, MAX_PULL_BYTES, limiter)
        body = b"".join(records) if records else None
        if self.changes == changes:  # nothing changed meanwhile
            self.pull_cache = (start, count, changes, body)
        return body

    def _pull_range(self, start: int, count: int, now: float) -> tuple[int, int]:
        """Where a pull reads from (the earliest held if ``start`` was let go) and how many
        records it may read (up to what is visible)."""
        start = max(start, self.store.earliest)
        return start, max(0, min(count, self.visible_end(now, start) - start))

    def release_due(self, now: float) -> list[tuple[int, int]]:
        """Let the deferred messages due at ``now`` go; return their batches, ``(first,
        count)`` (`DeferredOffsets.release_batches`)."""
        deferred = self.deferred
        released = deferred.release_batches(now)
        if released:
            self.changes += 1
            # the log of released batches keeps what a channel has not read yet, and a
            # channel reads it at once, keeping only what it passed while pending (O(channels))
            for channel in self.channels.values():
                channel.queue.read_released(deferred)
            deferred.forget_released(min((c.queue.released_seen for c in self.channels.values()),
                                         default=deferred.released_end))
        return released

    def next_due(self) -> float | None:
        """When the service's timer has something to do for this topic: a deferred message
        coming due, or a key to forget (None: nothing)."""
        dues = [d for d in (self.deferred.next_due(), self.keys.next_expiry()) if d is not None]
        return min(dues) if dues else None

    def pulls_waiting(self, first: int, count: int) -> list[int]:
        """Take the offsets from ``first`` (``count`` of them) where pulls are held out of
        ``held_at``, and return them: the pulls to wake (looked up the cheaper way round)."""
        held = self.held_at
        if not held:
            return []
        if count <= len(held):
            found = [o for o in range(first, first + count) if o in held]
        else:
            found = [o for o in held if first <= o < first + count]
        held.difference_update(found)
        return found

    def floor(self) -> int | None:
        """The lowest offset a channel or a group still needs (None: nobody reads)."""
        needs = [c.queue.floor(self.deferred) for c in self.channels.values()]
        needs += self.groups.values()
        return min(needs) if needs else None

    def expire(self, written_before: float | None, max_bytes: int | None) -> int:
        """Let go of the oldest records by retention (`TopicStore.expire`), whoever still
        needs them: each channel forgets those it had not finished (counted as
        ``expired``); return how many offsets the topic let go of."""
        earliest = self.store.earliest
        now_earliest = self.store.expire(written_before, max_bytes)
        if now_earliest == earliest:
            return 0
        self.changes += 1
        for channel in self.channels.values():
            channel.queue.drop_below(now_earliest, self.deferred)
        return now_earliest - earliest

    def trim(self) -> None:
        """Let go of what no channel or group needs any more."""
        floor = self.floor()
        if floor is not None:
            earliest = self.store.earliest
            self.store.trim(floor)
            if self.store.earliest != earliest:
                self.changes += 1
