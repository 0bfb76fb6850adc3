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
  deliveries than it was granted. A new message published with a ``defer`` still in the
  future goes to ``_later`` instead (NSQ's deferred queue), so it does not block the others.
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
    from collections.abc import Hashable, Mapping

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

    def __init__(self, start: int, *, msg_timeout: float, max_attempts: int = 0) -> None:
        self.cursor = start
        self.msg_timeout = msg_timeout
        self.max_attempts = max_attempts
        self.in_flight = InFlight()
        self._ready: deque[int] = deque()
        self._later: list[tuple[float, int]] = []  # (due, offset) heap
        self._attempts: dict[int, int] = {}  # attempts made so far, for ready and later ones
        self.delivered = self.finished = self.requeued = 0
        self.timed_out = self.dead_lettered = self.expired = 0

    # ------------------------------------------------------------------ reading

    def depth(self, end: int) -> int:
        """Messages waiting for a delivery (not in flight), the log up to ``end`` included."""
        return max(0, end - self.cursor) + len(self._ready) + len(self._later)

    @property
    def waiting_later(self) -> int:
        """Messages held back until a time (deferred or requeued with a delay)."""
        return len(self._later)

    def floor(self) -> int:
        """Return the lowest offset this channel has not finished (the cursor if none)."""
        low = self.cursor
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
        """True if `take` would hand out something now."""
        return (bool(self._ready) or self.cursor < end
                or bool(self._later and self._later[0][0] <= now))

    # ------------------------------------------------------------------ delivering

    def take(self, consumer: Hashable, count: int, now: float, end: int,
             deferred: Mapping[int, float]) -> list[tuple[int, int]]:
        """Deliver up to ``count`` messages to ``consumer``; return their (offset, attempt).

        ``end`` is the log's next offset; ``deferred`` maps the offsets published with a
        ``defer`` to when they are due (messages due later go to ``_later``).
        """
        self._release_due(now)
        taken: list[tuple[int, int]] = []
        ready = self._ready
        attempts_of = self._attempts
        while ready and len(taken) < count:
            offset = ready.popleft()
            taken.append((offset, attempts_of.pop(offset) + 1))
        cursor = self.cursor
        if not deferred:  # the usual case: the next offsets as they are
            stop = min(end, cursor + count - len(taken))
            taken += [(offset, 1) for offset in range(cursor, stop)]
            cursor = max(cursor, stop)
        while cursor < end and len(taken) < count:
            offset = cursor
            cursor += 1
            due = deferred.get(offset)
            if due is not None and due > now:
                heapq.heappush(self._later, (due, offset))
                attempts_of[offset] = 0
                continue
            taken.append((offset, 1))
        self.cursor = cursor
        if taken:
            self.in_flight.add_many(taken, consumer, now + self.msg_timeout)
            self.delivered += len(taken)
        return taken

    def drop_below(self, earliest: int) -> int:
        """Forget the messages below ``earliest`` that wait for a delivery (retention let
        go of them); return how many (counted as ``expired``). Deliveries in flight stay:
        their subscribers have them, and may finish them."""
        dropped = max(0, earliest - self.cursor)
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
