"""`Outlet`: a bus server's flow control towards one remote consumer.

The consumer announced how many messages it may hold (its ``max_buffered``: the window). The
server pushes at most that many before the consumer credits them back (one credit per
message its handler finished, or dropped), queues at most ``max_queued`` more, and refuses
the rest: a paused or slow consumer costs the server a bounded memory, whatever its senders
do. (Vert.x's ``MessageProducer`` credits, turned around: the consumer's bus grants them.)

Sans-I/O and not thread-safe: its owner holds the bus lock around every call, and passes
``now`` in. Invariants: ``0 <= unsent <= outstanding``, and ``outstanding <= window`` but
after the window shrank (`resize`: no message is taken back); a message is queued only while
the window is full, so the queue drains first when credit comes (order is kept); a queued
message whose deadline passed is never pushed, and is removed when room is needed (for the
owner to fail: `take_expired`). Credits never bring ``outstanding`` below ``unsent``: a client
cannot credit a message it was not sent yet, so one that lies (credits what it never got)
cannot make the server hold more than a window of messages not handed to its connection.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Literal, TypeVar

__all__ = ["Budget", "Offer", "Outlet"]

E = TypeVar("E")
Offer = Literal["push", "queued", "full"]


class Outlet(Generic[E]):
    """A remote consumer's window and queue at the bus server."""

    __slots__ = ("_expired", "_queue", "max_queued", "outstanding", "unsent", "window")

    def __init__(self, window: int, max_queued: int, outstanding: int = 0) -> None:
        self.window = window
        self.max_queued = max_queued
        # pushed (or about to be) and not credited back; a consumer registered again after
        # a lost connection starts with what it still holds
        self.outstanding = outstanding
        self.unsent = 0  # admitted to the window, not handed to the connection yet
        self._queue: deque[tuple[float | None, E]] = deque()
        self._expired: list[E] = []  # purged by `offer`, for `take_expired`

    @property
    def queued(self) -> int:
        """Messages waiting for room in the window."""
        return len(self._queue)

    def offer(self, entry: E, deadline: float | None, now: float) -> Offer:
        """Take a message for the consumer: ``"push"`` it now (it counts in the window),
        ``"queued"`` until credit comes, or ``"full"``: refused."""
        if self.outstanding < self.window and not self._queue:
            self.outstanding += 1
            self.unsent += 1
            return "push"
        if len(self._queue) >= self.max_queued:
            self._purge(now)
            if len(self._queue) >= self.max_queued:
                return "full"
        self._queue.append((deadline, entry))
        return "queued"

    def _purge(self, now: float) -> None:
        live: deque[tuple[float | None, E]] = deque()
        for deadline, entry in self._queue:
            if deadline is None or deadline > now:
                live.append((deadline, entry))
            else:
                self._expired.append(entry)
        self._queue = live

    def take_expired(self) -> list[E]:
        """Return (and forget) the queued messages `offer` removed because their deadline
        passed: their owner fails them."""
        expired, self._expired = self._expired, []
        return expired

    def sent(self, n: int) -> None:
        """``n`` messages the window admitted were handed to the connection."""
        self.unsent -= n

    def resize(self, window: int, credits: int, now: float) -> tuple[list[E], list[E]]:
        """The consumer may hold ``window`` messages from now on, and is done with
        ``credits``: return what the window admits at once, and what expired meanwhile
        (see `credit`). A smaller window takes nothing back: pushes wait until the
        consumer's credits bring ``outstanding`` under it."""
        self.window = window
        return self.credit(credits, now)

    def credit(self, credits: int, now: float) -> tuple[list[E], list[E]]:
        """The consumer is done with ``credits`` messages (or a push was refused): return
        the queued messages to push now, and those whose deadline passed meanwhile."""
        self.outstanding = max(self.unsent, self.outstanding - credits)
        push: list[E] = []
        expired: list[E] = []
        queue = self._queue
        while queue and self.outstanding < self.window:
            deadline, entry = queue.popleft()
            if deadline is not None and deadline <= now:
                expired.append(entry)
            else:
                self.outstanding += 1
                self.unsent += 1
                push.append(entry)
        return push, expired

    def clear(self) -> list[E]:
        """Remove and return every queued message (the consumer is gone)."""
        entries = [entry for _, entry in self._queue]
        self._queue.clear()
        return entries


class Budget:
    """What a bus server holds for one client connection's consumers, all together: messages
    queued, waiting to be pushed, or pushed and not yet answered, and their bytes (body and
    headers).

    Each consumer's window and queue bound its own messages; a connection may register many
    consumers (at one address, a publish reaches each), so this bounds them together. One
    message larger than ``max_bytes`` still goes when nothing else is held. Sans-I/O, under
    the bus lock, as `Outlet`.
    """

    __slots__ = ("bytes", "max_bytes", "max_messages", "messages")

    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.messages = 0
        self.bytes = 0

    def fits(self, size: int) -> bool:
        """True if one more message of ``size`` bytes may be held."""
        if self.messages >= self.max_messages:
            return False
        return self.messages == 0 or self.bytes + size <= self.max_bytes

    def charge(self, size: int) -> None:
        self.messages += 1
        self.bytes += size

    def release(self, size: int) -> None:
        self.messages -= 1
        self.bytes -= size
