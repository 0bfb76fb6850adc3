"""One queue's messages between their pull and their handling (Java's ``ProcessQueue``),
sans-I/O.

Theory of operation. Pulled messages are `put` in offset order (a queue is pulled by one
loop, one pull at a time). Handled ones are `remove`d in any order (handlers run
concurrently); what remains are the messages pulled and not yet handled, and the offset to
commit is the lowest of them, or, once all are handled, one past the highest pulled: a
message is never committed past while it waits. The thresholds pause the queue's pulls
while too much waits: over ``max_messages`` (1,000), ``max_bytes`` (100 MiB), or, for
concurrent handling, a span of offsets over ``max_span`` (2,000: one slow message holding the
commit back while later ones pile up). Orderly handling `take`s messages in offset order and
`commit`s (or `retry`s) what it took. ``dropped`` marks a queue that rebalancing took away:
its results no longer move offsets.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ._message import Message

__all__ = ["ProcessQueue"]

MAX_MESSAGES: Final = 1000  # DefaultMQPushConsumer.pullThresholdForQueue
MAX_BYTES: Final = 100 * 1024 * 1024  # pullThresholdSizeForQueue (MiB)
MAX_SPAN: Final = 2000  # consumeConcurrentlyMaxSpan


class ProcessQueue:
    """The messages of one queue pulled and not yet handled."""

    __slots__ = ("_order", "_taken", "count", "dropped", "highest", "locked", "locked_at",
                 "max_bytes", "max_messages", "max_span", "messages", "size")

    def __init__(self, *, max_messages: int = MAX_MESSAGES, max_bytes: int = MAX_BYTES,
                 max_span: int = MAX_SPAN) -> None:
        self.messages: dict[int, Message] = {}  # offset -> message, waiting
        self._order: deque[int] = deque()  # offsets in the order put (ascending)
        self._taken: dict[int, Message] = {}  # orderly: taken, being handled
        self.count = 0
        self.size = 0
        self.highest = -1
        self.dropped = False
        self.locked = False  # orderly: this client holds the broker's lock of the queue
        self.locked_at = 0.0
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.max_span = max_span

    def put(self, messages: list[Message]) -> int:
        """Add pulled ``messages`` (ascending offsets); return how many were new."""
        added = 0
        for message in messages:
            offset = message.queue_offset
            if offset in self.messages or offset in self._taken:
                continue
            self.messages[offset] = message
            if offset > self.highest:
                self.highest = offset
                self._order.append(offset)
            added += 1
            self.size += len(message.body)
        self.count += added
        return added

    def _first(self) -> int | None:
        order = self._order
        while order and order[0] not in self.messages and order[0] not in self._taken:
            order.popleft()
        return order[0] if order else None

    def remove(self, messages: list[Message]) -> int:
        """Forget handled ``messages``; return the offset to commit (-1: nothing pulled)."""
        for message in messages:
            if self.messages.pop(message.queue_offset, None) is not None:
                self.count -= 1
                self.size -= len(message.body)
        if self.count == 0:
            self.size = 0
        return self.commit_offset()

    def commit_offset(self) -> int:
        """Return the lowest offset still waiting, or one past the highest pulled."""
        first = self._first()
        if first is not None:
            return first
        return self.highest + 1 if self.highest >= 0 else -1

    def span(self) -> int:
        """Return the highest waiting offset minus the lowest (0 when empty)."""
        first = self._first()
        return 0 if first is None else self.highest - first

    def over_threshold(self, orderly: bool) -> str | None:
        """Return why the queue's pulls should pause now (None: they may go on)."""
        if self.count > self.max_messages:
            return "messages"
        if self.size > self.max_bytes:
            return "bytes"
        if not orderly and self.span() > self.max_span:
            return "span"
        return None

    # ------------------------------------------------------------------ orderly

    def take(self, n: int = 1) -> list[Message]:
        """Take the ``n`` lowest waiting messages to handle in order (orderly)."""
        out: list[Message] = []
        for offset in sorted(self.messages)[:n]:
            message = self.messages.pop(offset)
            self._taken[offset] = message
            out.append(message)
        return out

    def commit(self) -> int:
        """Forget what `take` took, handled; return the offset to commit (-1: none taken)."""
        if not self._taken:
            return -1
        for message in self._taken.values():
            self.count -= 1
            self.size -= len(message.body)
        self._taken.clear()
        return self.commit_offset()

    def retry(self, messages: list[Message]) -> None:
        """Put taken ``messages`` back, to be taken again (a failed orderly handler)."""
        for message in messages:
            if self._taken.pop(message.queue_offset, None) is not None:
                self.messages[message.queue_offset] = message

    def has_waiting(self) -> bool:
        return bool(self.messages)

    def clear(self) -> None:
        """Forget everything (the queue was dropped or sought)."""
        self.messages.clear()
        self._taken.clear()
        self._order.clear()
        self.count = 0
        self.size = 0
        self.highest = -1
