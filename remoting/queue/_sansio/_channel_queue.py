"""`ChannelQueue`: where every message of one channel stands (NSQ's channel, over a log).

Theory of operation (sync, takes ``now``, no I/O):
- A channel reads its topic's log in offset order through ``cursor``: every offset below it
  was handed to the channel. Each such message is in exactly one place: finished
  (acknowledged), in flight with one consumer (`InFlight`), ready for redelivery now
  (``_ready``, in the order it came back), waiting until a time (``_later``: requeued with a
  delay, or published with ``defer``), dead-lettered, or expired (its topic's retention let
  go of it before it was delivered: `drop_below`). The hypothesis state machine in the
  tests checks this over every interleaving.
- `take` hands a consumer up to ``count`` messages: ready ones first, then new ones from the
  log. The caller bounds ``count`` by the consumer's credits, so a consumer never holds more
  deliveries than it was granted. A batch published with a ``defer`` and not released yet is
  passed over (NSQ's deferred queue), so it does not block the others, and the channel keeps
  nothing of it: when the topic releases it (`DeferredOffsets`' log of released batches),
  its part below the cursor (from ``origin``, where the channel began or retention let go)
  is delivered, before the cursor moves on. The log is read in order (by the topic, for
  every channel, as it releases batches: `read_released`), and the cursor moves only once it
  is read to its end, so a batch released before the cursor reached it is delivered by the
  cursor, and one released after by the log: each once. A channel keeps only the ranges it
  passed while pending, so one that takes nothing makes the log keep nothing.
- Each delivery has an attempt number: 1 for the first, one more for each redelivery. A
  delivery ends with `finish` (done), `requeue` (ready again, or later with a delay), its
  deadline (`expire`: ready again), or its consumer's end (`consumer_gone`: ready again). With
  ``max_attempts`` > 0, a message whose delivery number ``max_attempts`` fails (requeued,
  timed out, or its consumer gone) is dead-lettered instead: the caller hands it to the hook.
- Only the consumer holding a delivery may finish, requeue or touch it (`Outcome.FOREIGN`).
- ``floor()``: the lowest offset not finished, below which the channel needs nothing.
"""

from __future__ import annotations

import enum
import heapq
from collections import deque
from typing import TYPE_CHECKING, NamedTuple

from ._in_flight import InFlight

if TYPE_CHECKING:
    from collections.abc import Hashable

    from ._deferred import DeferredOffsets

__all__ = ["ChannelQueue", "Outcome", "Returned"]


class Outcome(enum.Enum):
    """What became of an acknowledgement (`finish`, `requeue`, `touch`)."""

    DONE = "done"
    DEAD = "dead"  # a requeue at max_attempts: dead-lettered instead
    UNKNOWN = "unknown"  # not in flight (never delivered, finished, or timed out meanwhile)
    FOREIGN = "foreign"  # in flight with another consumer


class Returned(NamedTuple):
    """A delivery that ended without an acknowledgement (its deadline passed, or its
    consumer went away): the message is ready again, or dead-lettered (``dead``). A tuple:
    a connection closing with 65,536 deliveries makes one each, at once."""

    offset: int
    consumer: Hashable
    attempts: int
    dead: bool


class ChannelQueue:
    """The delivery state of one channel (see the module docstring)."""

    def __init__(self, start: int, *, msg_timeout: float, max_attempts: int = 0,
                 released_seen: int = 0) -> None:
        self.cursor = start
        self.origin = start  # below it, nothing is this channel's to deliver
        self._seen = released_seen  # the next entry of the topic's released log to read
        # released ranges it passed while pending, to deliver: (lo, hi), and their offsets
        self._released: deque[tuple[int, int]] = deque()
        self._released_count = 0
        self.msg_timeout = msg_timeout
        self.max_attempts = max_attempts
        self.in_flight = InFlight()
        self._ready: deque[int] = deque()
        self._later: list[tuple[float, int]] = []  # (due, offset) heap
        self._attempts: dict[int, int] = {}  # attempts made so far, for ready and later ones
        self.delivered = self.finished = self.requeued = 0
        self.timed_out = self.dead_lettered = self.expired = 0

    # ------------------------------------------------------------------ reading

    def depth(self, end: int, deferred: DeferredOffsets | None = None) -> int:
        """Messages waiting for a delivery (not in flight), the log up to ``end`` included;
        with the topic's ``deferred``, those the cursor passed until they are released too."""
        return (max(0, end - self.cursor) + len(self._ready) + len(self._later)
                + self._released_count + self._passed(deferred))

    def waiting(self, deferred: DeferredOffsets) -> int:
        """Messages held back until a time: requeued with a delay, or deferred and passed."""
        return len(self._later) + self._passed(deferred)

    def _passed(self, deferred: DeferredOffsets | None) -> int:
        if deferred is None or not deferred:
            return 0
        return deferred.pending_between(self.origin, self.cursor)

    @property
    def waiting_later(self) -> int:
        """Messages held back until a time (deferred or requeued with a delay)."""
        return len(self._later)

    def floor(self, deferred: DeferredOffsets | None = None) -> int:
        """Return the lowest offset this channel has not finished (the cursor if none);
        ``deferred``: its topic's, whose batches the cursor passed are not finished."""
        low = self.cursor
        if deferred is not None:
            self.read_released(deferred)  # what it released below the cursor is kept here
            pending = deferred.lowest_pending(self.origin, self.cursor)
            if pending is not None:
                low = min(low, pending)
        if self._released:
            low = min(low, min(lo for lo, _ in self._released))
        if self._ready:
            low = min(low, min(self._ready))
        if self._later:
            low = min(low, min(offset for _, offset in self._later))
        if self.in_flight.entries:
            low = min(low, min(self.in_flight.entries))
        return low

    def next_deadline(self) -> float | None:
        """Return when `expire` next has something to do (a deadline, or a message due)."""
        deadline = self.in_flight.next_deadline()
        if self._later:
            due = self._later[0][0]
            deadline = due if deadline is None else min(deadline, due)
        return deadline

    def has_ready(self, now: float, end: int) -> bool:
        """True if `take` may hand out something now."""
        return (bool(self._ready) or self.cursor < end
                or bool(self._released)
                or bool(self._later and self._later[0][0] <= now))

    def passed_deferred(self, deferred: DeferredOffsets) -> set[int]:
        """The offsets the cursor passed while deferred and not delivered yet (for checks
        and statistics: O(those offsets))."""
        self.read_released(deferred)
        out = {o for lo, hi in self._released for o in range(lo, hi)}
        out.update(offset for offset in deferred
                   if self.origin <= offset < self.cursor and offset not in out)
        return out

    # ------------------------------------------------------------------ delivering

    def take(self, consumer: Hashable, count: int, now: float, end: int,
             deferred: DeferredOffsets) -> list[tuple[int, int]]:
        """Deliver up to ``count`` messages to ``consumer``; return their (offset, attempt).

        ``end`` is the log's next offset; ``deferred``: the topic's messages published with
        a ``defer`` (passed over until released, then delivered from its released log).
        """
        self._release_due(now)
        taken: list[tuple[int, int]] = []
        ready = self._ready
        attempts_of = self._attempts
        while ready and len(taken) < count:
            offset = ready.popleft()
            taken.append((offset, attempts_of.pop(offset) + 1))
        if len(taken) < count:  # what was released below the cursor, before it moves
            self._take_released(count, deferred, taken)
        cursor = self.cursor
        if not deferred:  # the usual case: the next offsets as they are
            stop = min(end, cursor + count - len(taken))
            taken += [(offset, 1) for offset in range(cursor, stop)]
            cursor = max(cursor, stop)
        pending_end = deferred.pending_end
        while cursor < end and len(taken) < count:
            passed = pending_end(cursor)
            if passed is not None:  # not released yet: passed over whole, nothing kept
                cursor = passed
                continue
            taken.append((cursor, 1))
            cursor += 1
        self.cursor = cursor
        if taken:
            self._delivered(taken, consumer, now)
        return taken

    def _take_released(self, count: int, deferred: DeferredOffsets,
                       taken: list[tuple[int, int]]) -> None:
        """Read the topic's released log to its end (`read_released`: the cursor may move
        after it), and add to ``taken`` what was released below the cursor, up to ``count``."""
        self.read_released(deferred)
        released = self._released
        while released and len(taken) < count:
            lo, hi = released.popleft()
            stop = min(hi, lo + count - len(taken))
            taken += [(offset, 1) for offset in range(lo, stop)]
            self._released_count -= stop - lo
            if stop < hi:
                released.appendleft((stop, hi))

    @property
    def released_seen(self) -> int:
        """The index of the next entry of the topic's released log this channel reads."""
        return self._seen

    def read_released(self, deferred: DeferredOffsets) -> None:
        """Read the topic's log of released batches to its end: keep the part of each below
        the cursor (passed while pending: to deliver), drop the rest (the cursor delivers
        it). Right whenever it runs, since only `take` moves the cursor and reads first; the
        topic calls it as it releases batches, so the log keeps nothing for a channel that
        takes nothing, and `floor` and `passed_deferred` call it before they look. What a
        channel keeps is what it passed while pending (bounded by ``max_deferred`` then)."""
        seen, end = max(self._seen, deferred.released_base), deferred.released_end
        while seen < end:
            first, stop = deferred.released_at(seen)
            lo, hi = max(first, self.origin), min(stop, self.cursor)
            if lo < hi:
                self._released.append((lo, hi))
                self._released_count += hi - lo
            seen += 1
        self._seen = seen

    def _delivered(self, taken: list[tuple[int, int]], consumer: Hashable, now: float) -> None:
        self.in_flight.add_many(taken, consumer, now + self.msg_timeout)
        self.delivered += len(taken)

    def drop_below(self, earliest: int, deferred: DeferredOffsets | None = None) -> int:
        """Forget the messages below ``earliest`` that wait for a delivery (retention let
        go of them); return how many (counted as ``expired``). Deliveries in flight stay:
        their subscribers have them, and may finish them. ``deferred``: the topic's, whose
        batches the cursor passed below ``earliest`` are let go of too."""
        dropped = max(0, earliest - self.cursor)
        if deferred is not None and earliest > self.origin:
            dropped += sum(1 for offset in self.passed_deferred(deferred) if offset < earliest)
        self.origin = max(self.origin, earliest)
        if self._released and min(lo for lo, _ in self._released) < earliest:
            ranges = [(max(lo, earliest), hi) for lo, hi in self._released if hi > earliest]
            self._released = deque(ranges)
            self._released_count = sum(hi - lo for lo, hi in ranges)
        self.cursor = max(self.cursor, earliest)
        if self._ready and min(self._ready) < earliest:
            kept = [o for o in self._ready if o >= earliest]
            dropped += len(self._ready) - len(kept)
            self._ready = deque(kept)
        if self._later and min(o for _, o in self._later) < earliest:
            later = [(due, o) for due, o in self._later if o >= earliest]
            dropped += len(self._later) - len(later)
            heapq.heapify(later)
            self._later = later
        for offset in [o for o in self._attempts if o < earliest and o not in self.in_flight]:
            del self._attempts[offset]
        self.expired += dropped
        return dropped

    def skip(self, offset: int, consumer: Hashable) -> bool:
        """Forget ``consumer``'s delivery of a message that cannot be read (it left the
        log): as finished; return False if ``consumer`` does not hold it (it timed out
        meanwhile: whoever takes it next skips it so)."""
        entry = self.in_flight.pop(offset, consumer)
        if entry is None:
            return False
        self.finished += 1
        return True

    def finish(self, offset: int, consumer: Hashable) -> Outcome:
        """Acknowledge ``offset`` (NSQ's FIN)."""
        if self.in_flight.pop(offset, consumer) is None:
            return self._refused(offset)
        self.finished += 1
        return Outcome.DONE

    def finish_many(self, offsets: list[int], consumer: Hashable) -> list[tuple[int, Outcome]]:
        """`finish` each of ``offsets``; return the refused ones with why."""
        refused = self.in_flight.pop_many(offsets, consumer)
        self.finished += len(offsets) - len(refused)
        return [(offset, self._refused(offset)) for offset in refused]

    def requeue(self, offset: int, consumer: Hashable, delay: float, now: float) -> Outcome:
        """Put ``offset`` back, due after ``delay`` seconds (NSQ's REQ)."""
        entry = self.in_flight.pop(offset, consumer)
        if entry is None:
            return self._refused(offset)
        if self._dead(entry.attempts):
            self.dead_lettered += 1
            return Outcome.DEAD
        self.requeued += 1
        self._attempts[offset] = entry.attempts
        if delay > 0:
            heapq.heappush(self._later, (now + delay, offset))
        else:
            self._ready.append(offset)
        return Outcome.DONE

    def attempts(self, offset: int) -> int:
        """Return the deliveries ``offset`` had so far (0: not in flight)."""
        entry = self.in_flight.entries.get(offset)
        return 0 if entry is None else entry.attempts

    def touch(self, offset: int, consumer: Hashable, now: float) -> Outcome:
        """Give ``offset`` a full timeout again from ``now`` (NSQ's TOUCH)."""
        if not self.in_flight.touch(offset, consumer, now + self.msg_timeout):
            return self._refused(offset)
        return Outcome.DONE

    def expire(self, now: float) -> list[Returned]:
        """Requeue the deliveries whose deadline passed (or dead-letter them); move the
        messages now due to ready. Return the deliveries that ended."""
        returned = [self._return(entry.offset, entry.consumer, entry.attempts)
                    for entry in self.in_flight.expire(now)]
        self.timed_out += len(returned)
        self._release_due(now)
        return returned

    def consumer_gone(self, consumer: Hashable) -> list[Returned]:
        """Requeue (or dead-letter) every delivery ``consumer`` held; return them."""
        return [self._return(entry.offset, consumer, entry.attempts)
                for entry in self.in_flight.pop_consumer(consumer)]

    def _return(self, offset: int, consumer: Hashable, attempts: int) -> Returned:
        if self._dead(attempts):
            self.dead_lettered += 1
            return Returned(offset, consumer, attempts, dead=True)
        self._attempts[offset] = attempts
        self._ready.append(offset)
        return Returned(offset, consumer, attempts, dead=False)

    def _dead(self, attempts: int) -> bool:
        return 0 < self.max_attempts <= attempts

    def _release_due(self, now: float) -> None:
        later = self._later
        while later and later[0][0] <= now:
            self._ready.append(heapq.heappop(later)[1])

    def _refused(self, offset: int) -> Outcome:
        return Outcome.UNKNOWN if offset not in self.in_flight else Outcome.FOREIGN
