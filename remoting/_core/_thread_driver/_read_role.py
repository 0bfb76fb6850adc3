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
  A follower claimed for the wake chain (below) finds itself in ``_chained`` instead, put
  there last, once it is in the chain: it leaves without the mutex too.
- The wake chain: the followers whose calls one read completed are woken one after another,
  not all at once. Waking a thread while holding the GIL (a futex wake each) only made it
  preempt the waker and queue for the GIL, and all of them together fought for it while
  the reader still worked: the reader wakes one (`wake_answered`, once the read's answers
  are handled, before its requests and its sends), and each thread leaving a wait on the
  connection wakes the next (`wake_next`), as it leaves, whatever ends its wait (an
  exception, a timeout, the role handed to it: a wake out of turn costs one spurious wake
  of a thread's next sleep, never a lost one): it is about to give up the GIL anyway,
  so they run one after another. The reader claims the followers it chains as a hand-off
  does (the pop out of the queue, under the mutex, where it also puts them in the chain): a
  claimed follower is still in its wait, and leaves it (woken, or at the end of its wait)
  only once it is in the chain, so each thread in the chain wakes another as it leaves and
  none is lost (one whose wait ended before its turn was paid for by its own leaving). A
  read of one answer, and threads not following (the reader itself, a thread asleep
  elsewhere), are woken at once (these at the same point, after the read's answers). The
  chain is first in, first out: a read appends to what is left of the last one's, and
  wakes its first. Only an interrupt (KeyboardInterrupt, on the main thread) between the
  pop of a follower and its append to the chain, or between taking the next thread and
  waking it, leaves that one to the end of its wait.
- Invariants (tests/remoting/test_one_thread_reads_and_every_answer_reaches_its_call_once.py):
  at most one holder at a time; a thread returns from its wait only with its call done, its
  wait over, or the call moved elsewhere, never holding the role; the role is never handed
  to a follower whose call is done; a follower leaves woken either by its completion or by
  the hand-off, never both holding the role and queued; a follower whose wait ends with an
  exception (KeyboardInterrupt in its sleep) leaves the queue too, so the role is never
  handed to a thread gone (`ThreadConnection.wait`'s ``finally``); every follower a read
  chained is woken by the reader or by another chained thread leaving its wait (one that
  raises too).
- Everything here but `stop_following`'s pop and look, `wake_next` and the wakes of
  `wake_answered` runs under the connection's mutex (passed in: the same lock guards the
  send role and the lifecycle), held around bookkeeping only.
"""

from __future__ import annotations

from collections import deque
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

    __slots__ = ("_chain", "_chained", "_followers", "_mutex", "_state", "holder")

    def __init__(self, mutex: threading.Lock, state: ConnectionState) -> None:
        self._mutex = mutex  # the connection's
        self._state = state
        self.holder: object | None = None  # who reads now (None: nobody)
        # waiting threads and what each waits for, in arrival order (a dict: O(1) removal)
        self._followers: dict[ThreadWaiter, Awaited] = {}
        # followers whose calls a read completed, to wake one after another (first in,
        # first out: a thread chained early is not passed over by later reads' threads)
        self._chain: deque[ThreadWaiter] = deque()
        # followers claimed for the chain that have not yet found out (`stop_following`)
        self._chained: set[ThreadWaiter] = set()

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
        chained = self._chained
        if waiter in chained:  # claimed for the wake chain (`wake_answered`), not the role
            chained.discard(waiter)
            return False
        with self._mutex:  # handed the role, or chained a moment ago
            chained.discard(waiter)
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

    def wake_answered(self, waiters: list[ThreadWaiter]) -> None:
        """Wake the threads whose calls one read completed (the reader, after the read):
        the followers among them through the chain (claimed here, see the module
        docstring), the others at once."""
        if len(waiters) == 1:  # nothing to take turns with
            waiters[0].wake()
            return
        followers = self._followers
        chain = self._chain
        chained = self._chained
        others = []
        with self._mutex:
            for waiter in waiters:
                if followers.pop(waiter, None) is not None:
                    chain.append(waiter)
                    chained.add(waiter)  # (last: once it is there, it may leave at once)
                else:
                    others.append(waiter)
        try:
            for waiter in others:
                waiter.wake()
        finally:  # (an interrupt here must not strand the whole chain)
            self.wake_next()

    def wake_next(self) -> None:
        """Wake the next thread of the chain, if any (a follower leaving its wait, or the
        reader after a read)."""
        chain = self._chain
        if chain:
            try:
                waiter = chain.popleft()  # (atomic: leaving threads race for it)
            except IndexError:
                return
            waiter.wake()

    def drop_followers(self) -> None:
        """Forget the followers (mutex held): the connection is released, which fails their
        calls and so wakes them."""
        self._followers.clear()
