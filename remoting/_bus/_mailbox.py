"""`Mailbox`: a consumer's messages not yet handled (Vert.x's ``HandlerRegistration``
``pending`` queue, with ``pause``, ``resume`` and ``maxBufferedMessages``).

A consumer handles its messages one at a time, in order, in one drain (a thread's job or a
task) that runs while it has messages and is not paused. Sans-I/O and not thread-safe: its
owner holds the bus lock around every call. Invariants: an offer is taken only while fewer
than ``max_buffered`` messages are held, the one the handler runs included, and while their
bytes and its own stay within ``max_bytes`` (one message larger than that is taken when
nothing is held, alone); beyond, it is ``"full"`` (Vert.x discards; a bound lowered below
what is held keeps them all); ``held_bytes`` is the sum of the sizes of what is held;
exactly one drain runs while ``running`` (``"start"`` from `offer`, or True from `resume`,
asks the owner to start it, and `take` returning None ends it); a paused mailbox hands out
nothing, and keeps what it holds.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Literal, TypeVar

__all__ = ["Mailbox"]

M = TypeVar("M")


class Mailbox(Generic[M]):
    """A consumer's buffer, pause state and drain flag."""

    __slots__ = ("_handling", "_in_handler", "_queue", "held_bytes", "max_buffered", "max_bytes",
                 "paused", "running")

    def __init__(self, max_buffered: int, max_bytes: int) -> None:
        self.max_buffered = max_buffered
        self.max_bytes = max_bytes
        self.paused = False
        self.running = False  # a drain is running (or asked to start)
        self._queue: deque[tuple[M, int]] = deque()
        self._handling = False  # the handler runs a message
        self._in_handler = 0  # and its size
        self.held_bytes = 0

    @property
    def buffered(self) -> int:
        """Messages waiting for the handler."""
        return len(self._queue)

    @property
    def held(self) -> int:
        """Messages waiting, and the one the handler runs."""
        return len(self._queue) + self._handling

    def offer(self, message: M, size: int) -> Literal["start", "queued", "full"]:
        """Take ``message`` of ``size`` bytes: ``"start"`` a drain for it, ``"queued"``
        behind others (or while paused), or ``"full"``: not taken."""
        held = self.held
        if held >= self.max_buffered or (held and self.held_bytes + size > self.max_bytes):
            return "full"
        self._queue.append((message, size))
        self.held_bytes += size
        if self.running or self.paused:
            return "queued"
        self.running = True
        return "start"

    def take(self) -> M | None:
        """Return the next message for the running drain, or None: the drain ends (nothing
        left, or paused)."""
        if self.paused or not self._queue:
            self.running = False
            return None
        message, self._in_handler = self._queue.popleft()
        self._handling = True
        return message

    def done(self) -> None:
        """The handler finished the message `take` gave it."""
        self.held_bytes -= self._in_handler
        self._in_handler = 0
        self._handling = False

    def pause(self) -> None:
        """Stop handing out messages (the one running finishes); keep what arrives."""
        self.paused = True

    def resume(self) -> bool:
        """Hand out messages again; True if a drain must start for those waiting."""
        self.paused = False
        if self.running or not self._queue:
            return False
        self.running = True
        return True

    def clear(self) -> list[M]:
        """Remove and return the messages waiting (the consumer is unregistered)."""
        messages = [message for message, _ in self._queue]
        self.held_bytes = self._in_handler
        self._queue.clear()
        return messages
