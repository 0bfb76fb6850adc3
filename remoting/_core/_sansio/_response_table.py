"""`ResponseTable`: pending requests by opaque, with their deadlines.

Sync bookkeeping with an injected ``now``, used by one driver at a time under its own rule (the
trio driver's loop thread; the thread driver's lock); it never does I/O and never completes a
future itself: it returns the entries it removed, and the caller completes them.

Theory of operation:
- The table owns its entries: they are added and removed only by its methods. `register`
  (`register_all` for a batch's group) is the one way in; it gives a call whose opaque is
  pending already a copy of its request with an opaque of its own (the same command sent
  twice at once: the caller's command is never changed). The ways out: `pop_for` (an answer,
  a failed send, a cancelled wait, a deadline the caller watched), `take_answers` (one read's
  answers together), `expire`, `pop_connection`, `pop_all`.
- An opaque is in the table at most once, and removing it is the only way to own its
  completion: each entry completes exactly once. An answer is taken only by the connection
  its call was sent on: an opaque of another connection's call stays where it is.
- The deadlines are a `LazyDeadlines` heap (the one the held requests and the queue's
  deliveries use, `_deadlines.py`): it may hold entries already removed (lazy deletion), and
  is rebuilt when it grows to more than twice the live entries plus `COMPACT_SLACK`. It holds
  (deadline, opaque) only, never the future: a completed call (its response body included)
  must not stay alive until the next rebuild. A heap entry is live while its opaque maps to
  a future with that deadline. `register` pushes onto its heap directly (the hot path).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from codec import RemotingCommand, next_opaque

from ._deadlines import COMPACT_SLACK, LazyDeadlines

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Entry", "ResponseTable"]


class Entry(Protocol):
    """What the table reads and sets of a call (a driver's `ResponseFuture`)."""

    request: RemotingCommand
    opaque: int
    deadline: float
    conn: Any  # the connection it was sent on


F = TypeVar("F", bound=Entry)

_push = heapq.heappush


class ResponseTable(Generic[F]):
    """Pending calls (`Entry`: one driver's `ResponseFuture` objects) by opaque."""

    __slots__ = ("_deadlines", "_entries")

    def __init__(self) -> None:
        self._entries: dict[int, F] = {}  # pending futures by opaque (see the module docstring)
        self._deadlines = LazyDeadlines()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, opaque: int) -> bool:
        return opaque in self._entries

    @property
    def deadline_entries(self) -> int:
        """Entries in the deadline heap, removed ones included (bounded by compaction)."""
        return len(self._deadlines)

    def get(self, opaque: int) -> F | None:
        """Return the pending entry for ``opaque``, if any (it stays in the table)."""
        return self._entries.get(opaque)

    def on_connection(self, conn: object) -> list[F]:
        """Return the entries pending on ``conn`` (they stay in the table)."""
        return [f for f in self._entries.values() if f.conn is conn]

    # ------------------------------------------------------------------ in

    def register(self, fut: F) -> None:
        """Register ``fut`` under its request's opaque (``fut.opaque`` is set to it); if that
        opaque is pending already, ``fut.request`` becomes a copy with a new opaque first."""
        entries = self._entries
        request = fut.request
        opaque = request.opaque
        if opaque in entries:  # the same command in flight twice: a copy goes out
            request = fut.request = request.with_opaque(next_opaque())
            opaque = request.opaque
        fut.opaque = opaque
        entries[opaque] = fut
        heap = self._deadlines.heap
        _push(heap, (fut.deadline, opaque))
        if len(heap) > 2 * len(entries) + COMPACT_SLACK:
            self._compact()

    def register_all(self, futs: Sequence[F]) -> list[int]:
        """`register` each of ``futs`` in order (a batch's group, at once); return the
        indexes of those given a copy with a new opaque (their frames, encoded before, must
        be encoded again)."""
        entries = self._entries
        heap = self._deadlines.heap
        copied: list[int] = []
        for i, fut in enumerate(futs):
            opaque = fut.request.opaque
            if opaque in entries:
                request = fut.request.with_opaque(next_opaque())
                fut.request = request
                opaque = request.opaque
                copied.append(i)
            fut.opaque = opaque
            entries[opaque] = fut
            _push(heap, (fut.deadline, opaque))
        if len(heap) > 2 * len(entries) + COMPACT_SLACK:
            self._compact()
        return copied

    def _compact(self) -> None:
        entries = self._entries
        self._deadlines.compact(len(entries),
                                lambda: [(f.deadline, o) for o, f in entries.items()])

    def _take(self, opaque: int, deadline: float) -> F | None:
        """Remove and return the entry of a heap pair that is due, if the pair is live."""
        fut = self._entries.get(opaque)
        if fut is None or fut.deadline != deadline:
            return None
        del self._entries[opaque]
        return fut

    def _live(self, opaque: int, deadline: float) -> bool:
        fut = self._entries.get(opaque)
        return fut is not None and fut.deadline == deadline

    # ------------------------------------------------------------------ out

    def pop_for(self, opaque: int, conn: object) -> F | None:
        """Remove and return the entry for ``opaque`` only if it was sent on ``conn``."""
        fut = self._entries.get(opaque)
        if fut is None or fut.conn is not conn:
            return None
        del self._entries[opaque]
        return fut

    def take_answers(self, conn: object, answers: Sequence[RemotingCommand]
                     ) -> list[F | None]:
        """Remove and return the entry each of ``answers`` (one read's, from ``conn``)
        answers, in order: None for an answer that matches no call sent on ``conn`` (an
        orphan; a call of another connection with that opaque stays pending)."""
        entries = self._entries
        get = entries.get
        taken: list[F | None] = []
        for answer in answers:
            opaque = answer.opaque
            fut = get(opaque)
            if fut is not None and fut.conn is conn:
                del entries[opaque]
                taken.append(fut)
            else:
                taken.append(None)
        return taken

    def expire(self, now: float) -> list[F]:
        """Remove and return every entry whose deadline is at or before ``now``."""
        return self._deadlines.pop_due(now, self._take)

    def next_deadline(self) -> float | None:
        """Return the earliest deadline still pending, or None."""
        return self._deadlines.next_deadline(self._live)

    def pop_connection(self, conn: object) -> list[F]:
        """Remove and return every entry sent on ``conn``."""
        gone = [f for f in self._entries.values() if f.conn is conn]
        for fut in gone:
            del self._entries[fut.opaque]
        return gone

    def pop_all(self) -> list[F]:
        """Remove and return every entry."""
        gone = list(self._entries.values())
        self._entries.clear()
        self._deadlines.clear()
        return gone
