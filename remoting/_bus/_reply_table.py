"""`ReplyTable`: the reply addresses a bus waits on (Vert.x's one-shot reply handler
registrations, with their timeouts).

Sans-I/O and not thread-safe: its owner holds the bus lock around every call, and passes
``now`` in. Invariants: only the holder of an entry's message (a connection, or None: this
process) takes it, so no other client can answer, fail or hijack it; whoever removes an
entry (`take`, `expire`, `remove`, `drop_peer`) completes its waiter, and does so once; an
expired entry is never taken (a reply that comes after the deadline finds no address); the
deadline heap holds addresses only, never waiters, so a completed entry is not kept alive by
it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Generic, TypeVar

from .._core._sansio._deadlines import LazyDeadlines

__all__ = ["PendingReply", "ReplyTable"]

W = TypeVar("W")


@dataclass(slots=True, eq=False, kw_only=True)
class PendingReply(Generic[W]):
    """A reply address and whoever waits for its answer.

    Attributes:
        reply_address: the generated address the answer goes to.
        address: the address the message was sent to (for failures; None for a reply).
        waiter: whoever waits: a thread or task of this process.
        deadline: `time.monotonic` instant the wait ends (None: no deadline).
        requester: the connection the wait is for (None: this process), so that its loss
            forgets the entry.
        holder: the connection of the consumer that holds the message (None: this process
            or not delivered yet), so that its loss fails the entry.
    """

    reply_address: str
    address: str | None
    waiter: W
    deadline: float | None
    requester: object | None = None
    holder: object | None = None


class ReplyTable(Generic[W]):
    """Reply addresses waited on, with their deadlines."""

    __slots__ = ("_deadlines", "_entries", "_prefix", "_sequence")

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._sequence = itertools.count(1)
        self._entries: dict[str, PendingReply[W]] = {}
        self._deadlines = LazyDeadlines[str]()  # lazy: may name removed entries

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, waiter: W, deadline: float | None, *, address: str | None,
            requester: object | None = None, holder: object | None = None
            ) -> PendingReply[W]:
        """Register a new reply address for ``waiter``; return its entry."""
        reply_address = f"{self._prefix}{next(self._sequence)}"
        entry = PendingReply(reply_address=reply_address, address=address, waiter=waiter,
                             deadline=deadline, requester=requester, holder=holder)
        self._entries[reply_address] = entry
        if deadline is not None:
            self._deadlines.push(deadline, reply_address)
        return entry

    def take(self, reply_address: str, now: float, holder: object | None = None
             ) -> PendingReply[W] | None:
        """Remove and return the entry of ``reply_address`` for an answer from ``holder``;
        None if there is none, it has expired (call `expire` to collect those), or its
        message is held by another: only the holder of a message may answer it."""
        entry = self._entries.get(reply_address)
        if (entry is None or entry.holder is not holder
                or (entry.deadline is not None and entry.deadline <= now)):
            return None
        del self._entries[reply_address]
        return entry

    def get(self, reply_address: str) -> PendingReply[W] | None:
        """Return the entry of ``reply_address`` without removing it."""
        return self._entries.get(reply_address)

    def remove(self, entry: PendingReply[W]) -> bool:
        """Remove ``entry``; False if it was already removed."""
        if self._entries.get(entry.reply_address) is not entry:
            return False
        del self._entries[entry.reply_address]
        return True

    def expire(self, now: float) -> list[PendingReply[W]]:
        """Remove and return the entries whose deadline is at or before ``now``."""
        return self._deadlines.pop_due(now, self._take_due)

    def next_deadline(self) -> float | None:
        """Return the earliest deadline of an entry still here (None: none has one)."""
        return self._deadlines.next_deadline(self._live)

    def _take_due(self, reply_address: str, deadline: float) -> PendingReply[W] | None:
        entry = self._entries.get(reply_address)
        if entry is None or entry.deadline != deadline:
            return None
        del self._entries[reply_address]
        return entry

    def _live(self, reply_address: str, deadline: float) -> bool:
        entry = self._entries.get(reply_address)
        return entry is not None and entry.deadline == deadline

    def drop_peer(self, peer: object) -> tuple[list[PendingReply[W]], list[PendingReply[W]]]:
        """Remove the entries that involve the connection ``peer``, which closed; return
        (those it requested: nobody waits any more, those its consumer held: to fail)."""
        requested = [e for e in self._entries.values() if e.requester is peer]
        held = [e for e in self._entries.values() if e.holder is peer and e.requester is not peer]
        for entry in requested + held:
            del self._entries[entry.reply_address]
        return requested, held
