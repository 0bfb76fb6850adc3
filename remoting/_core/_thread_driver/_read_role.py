"""`ReadRole`: who reads a thread-driven connection, one thread at a time (leader/follower).

Theory of operation (httpcore's ``_sync`` model: whoever waits reads), the one place this
protocol is written; `ThreadConnection.wait` drives it:
- Reading a connection is a role. Its ``holder`` is a thread waiting for one of its calls, a
  caller about to use the connection (`claim`: to look at it first, or to read its sync
  call's answer next), or the background reader; only the holder touches the decoder and
  the socket's read side, so reading needs no lock beyond taking the role.
- A thread that waits for a call (or a batch) and finds the role free takes it and reads for
  everyone: each answer it reads completes its call, which wakes that call's thread. Finding
  it taken, it joins the followers, with what it waits for, and sleeps on its `ThreadWaiter`
  until its call completes or the role is handed to it (`lead_or_follow`).
- The holder keeps the role until its own call is done or its wait ends, then hands it on
  (`pass_on`) to the first follower whose call is not done: leader/follower. Followers whose
  calls are done are passed over: their completion wakes them, and handing them the role
  would only pass it on again, a thread switch each, while nobody reads. With no such
  follower the role is left free (the connection then tells its owner if something must
  still be read: the background reader takes it).
- A woken follower leaves the queue without the connection's mutex (`stop_following`):
  threads that one read woke together would otherwise queue up on the mutex as they leave,
  each losing the GIL while it holds it. Taking a follower out of the queue is the claim:
  one ``dict.pop`` (atomic under the GIL), made the same way by a holder handing the role on,
  so exactly one of them wins. If the holder won, it made the follower the holder within the
  same hold of the mutex, and the follower, not finding itself in the queue, looks there.
- Invariants (tests/remoting/test_one_thread_reads_and_every_answer_reaches_its_call_once.py):
  at most one holder at a time; a thread returns from its wait only with its call done, its
  wait over, or the call moved elsewhere, never holding the role; the role is never handed
  to a follower whose call is done; a follower leaves woken either by its completion or by
  the hand-off, never both holding the role and queued.
- Everything here but `stop_following`'s pop runs under the connection's mutex (passed in:
  the same lock guards the send role and the lifecycle), held around bookkeeping only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import threading

    from .._calling._future import ThreadWaiter
    from .._sansio._connection_state import ConnectionState

__all__ = ["Awaited", "ReadRole"]


class Awaited(Protocol):
    """What a thread waits for on a connection: a call's future, or a batch."""

    @property
    def conn(self) -> Any: ...

    def done(self) -> bool: ...

    def _add_thread_waiter(self, waiter: ThreadWaiter) -> bool: ...

    def _remove_thread_waiter(self, waiter: ThreadWaiter) -> None: ...


class ReadRole:
    """Who reads one connection, and the threads following (see the module docstring)."""

    __slots__ = ("_followers", "_mutex", "_state", "holder")

    def __init__(self, mutex: threading.Lock, state: ConnectionState) -> None:
        self._mutex = mutex  # the connection's
        self._state = state
        self.holder: object | None = None  # who reads now (None: nobody)
        # waiting threads and what each waits for, in arrival order (a dict: O(1) removal)
        self._followers: dict[ThreadWaiter, Awaited] = {}

    @property
    def free(self) -> bool:
        """True while nobody holds the role (a racy hint)."""
        return self.holder is None

    def claim(self, who: object) -> bool:
        """Take the role for ``who`` if it is free and the connection open; True if taken."""
        if self.holder is not None:  # a racy look first: taken, most of the time, when busy
            return False
        with self._mutex:
            if self.holder is None and self._state.usable:
                self.holder = who
                return True
            return False

    def lead_or_follow(self, waiter: ThreadWaiter, call: Awaited) -> bool:
        """Take the role if it is free (True); else queue as a follower of ``call`` (on a
        closing connection too: its release fails the call, which wakes the thread)."""
        with self._mutex:
            if self.holder is None and self._state.usable:
                self.holder = waiter
                return True
            self._followers[waiter] = call
            return False

    def stop_following(self, waiter: ThreadWaiter) -> bool:
        """Leave the queue (woken, or at the end of its wait); True if the role was handed
        to this thread meanwhile (see the module docstring: the pop is the claim)."""
        if self._followers.pop(waiter, None) is not None:
            return False
        with self._mutex:
            return self.holder is waiter

    def pass_on(self) -> ThreadWaiter | None:
        """Give the role up (mutex held): to the first follower whose call is not done, taken
        out of the queue (returned, to be woken), else free (None)."""
        follower = None
        followers = self._followers
        if followers and self._state.usable:
            # a copy: followers leave the queue without the mutex (`stop_following`), so the
            # claim is the pop, and one may be gone by the time it is looked at
            for waiter, call in list(followers.items()):
                if not call.done() and followers.pop(waiter, None) is not None:
                    follower = waiter
                    break
        self.holder = follower
        return follower

    def drop_followers(self) -> None:
        """Forget the followers (mutex held): the connection is released, which fails their
        calls and so wakes them."""
        self._followers.clear()
