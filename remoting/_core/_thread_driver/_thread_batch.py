"""`ThreadBatch`: one ``invoke_many`` call of the thread driver, driven by its calling thread.

As the trio driver's `Batch`: a window of at most ``limit`` requests is in flight; each
completion records its result and sends the next request, so the calling thread, reading
its own answers (`ThreadConnection.wait`), keeps the window full without a hand-off. A
completion read by another thread pumps the window from there (sends never wait). What a
completion cannot do (wait for room below the high water mark, connect elsewhere after
GO_AWAY) wakes the calling thread, which does it. Every request has its own deadline; a
failed request fails alone; one answered GO_AWAY is resent once (`ThreadGoAway`).
The batch holds the in-flight permits of its window (taken as it grows, passed from a
finished request to the next, given back when nothing is left to send).

``_lock`` (re-entrant: a send that fails completes a request on the same thread) guards the
window's bookkeeping.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..._errors import RemotingError, RemotingTimeoutError
from .._calling._future import thread_waiter
from .._sansio._permit_errors import batch_got_no_permit
from ._pending_calls import ThreadCall

if TYPE_CHECKING:
    from collections.abc import Sequence

    from codec import RemotingCommand

    from .._calling._future import ResponseFuture, ThreadWaiter
    from ._thread_channels import ThreadTarget
    from ._thread_connection import ThreadConnection
    from ._thread_permits import ThreadPermits

__all__ = ["GROUP_FRAMES", "BatchDriver", "ThreadBatch"]

# The most requests one group of a batch's window holds. A refill (after a read of answers)
# is one group up to this: each group costs a hold of the driver's lock, a queueing and a
# send (system call) of its own. Groups of `FLUSH_FRAMES` (16) took more client CPU per
# request of an ``invoke_many`` of 64 (bench/blocking.py --modes many64) at no gain in rate:
# the peer has the rest of the window to work on while a group is encoded. It bounds how far
# a group may take the queue past the high water mark (checked before each group).
GROUP_FRAMES: Final = 64


class BatchDriver(Protocol):
    """What a batch needs from the thread driver."""

    @property
    def async_permits(self) -> ThreadPermits: ...

    def connection(self, target: ThreadTarget, deadline: float, timeout: float
                   ) -> ThreadConnection: ...

    def send_batch(self, conn: ThreadConnection, futs: list[Any], *, elsewhere: bool
                   ) -> bool: ...

    def next_deadline(self) -> float: ...

    def expire_due(self, now: float) -> None: ...

    def make_unattended(self, conn: ThreadConnection, futs: list[ResponseFuture]) -> None: ...


class ThreadBatch:
    """One ``invoke_many`` call (see the module docstring)."""

    def __init__(self, driver: BatchDriver, target: ThreadTarget,
                 requests: Sequence[RemotingCommand], timeout: float, limit: int,
                 finished_at: list[float] | None) -> None:
        self._driver = driver
        self._target = target
        # where its requests are resent after GO_AWAY; False: not resendable (a channel's)
        self.retry_target: str | None | bool = (
            target if target is None or isinstance(target, str) else False)
        self._requests = requests
        self.timeout = timeout
        self._limit = max(1, limit)
        n = len(requests)
        self.results: list[Any] = [None] * n
        self._finished_at = finished_at
        if finished_at is not None:
            finished_at[:] = [0.0] * n
        self.conn: ThreadConnection | None = None
        self._lock = threading.RLock()
        self._owner: ThreadWaiter | None = None
        self._in_flight: dict[int, ResponseFuture] = {}
        self._next = 0
        self._held = 0  # permits held: at least len(_in_flight)
        self._completed = 0
        self._needs_owner = False  # the calling thread has to wait for room or move off
        self._needs_permit = False  # ... or for a permit: nothing of the batch is in flight
        self._sleeping = False  # the calling thread sleeps until a completion (`_sleep`)

    # ------------------------------------------------------------------ waited for (Awaited)

    def done(self) -> bool:
        """True when the calling thread should stop reading its connection: all done, it has
        work (room to wait for, a move to another connection), or what is left is in flight
        on a connection it moved off (the background reader reads that one)."""
        return (self._completed == len(self._requests) or self._needs_owner
                or self._only_elsewhere())

    def _only_elsewhere(self) -> bool:
        """Nothing left to send and every request in flight is on another connection."""
        conn = self.conn
        return (self._next == len(self._requests) and bool(self._in_flight)
                and all(f.conn is not conn for f in list(self._in_flight.values())))

    def _add_thread_waiter(self, waiter: ThreadWaiter) -> bool:
        with self._lock:
            if self.done():
                return False
            self._owner = waiter
            return True

    def _remove_thread_waiter(self, waiter: ThreadWaiter) -> None:
        with self._lock:
            if self._owner is waiter:
                self._owner = None

    # ------------------------------------------------------------------ the calling thread

    def run(self) -> list[Any]:
        """Send every request and wait for all of them; the results in order."""
        driver = self._driver
        n = len(self._requests)
        if self.timeout <= 0:  # an expired deadline (call_timeout gives 0): nothing is sent
            addr = self._target if isinstance(self._target, str) else None
            self._fail_rest(RemotingTimeoutError(addr, 0.0))
            return self.results
        try:
            while self._completed < n:
                conn = self.conn
                with self._lock:
                    self._needs_owner = False
                if conn is None or (not conn.state.takes_calls and self._next < n):
                    if not self._move_to_new_connection():
                        continue
                    conn = self.conn
                assert conn is not None
                if self._next < n and conn.queued_bytes > conn.high_water:
                    try:
                        conn.wait_for_room(monotonic() + self.timeout)
                    except RemotingError as exc:
                        self._fail_rest(exc)
                        continue
                self._pump()
                if self._needs_permit:
                    self._wait_for_permit()
                    continue
                if self._completed == n or self._needs_owner:
                    continue
                until = min(driver.next_deadline(), monotonic() + self.timeout)
                if self._only_elsewhere():
                    self._sleep(until)  # until a completion (or a deadline) wakes it
                else:
                    conn.wait(self, until)
                now = monotonic()
                if now >= until:
                    driver.expire_due(now)
        finally:
            self._give_back_spare()
        return self.results

    def _wait_for_permit(self) -> None:
        """Nothing of the batch is in flight and other calls hold every permit: wait for one
        within the request timeout (RocketMQ's ``semaphoreAsync.tryAcquire(timeout)``); past
        it, the rest fails as too many requests."""
        with self._lock:
            self._needs_permit = False
        if self._driver.async_permits.take(monotonic() + self.timeout):
            with self._lock:
                self._held += 1
            return
        self._fail_rest(batch_got_no_permit(
            self.timeout, None if self.conn is None else self.conn.remote_addr))

    def _sleep(self, until: float) -> None:
        waiter = thread_waiter()
        with self._lock:
            if self._completed == len(self._requests):
                return
            self._owner = waiter
            self._sleeping = True
        try:
            waiter.sleep(until - monotonic())
        finally:
            with self._lock:
                self._owner = None
                self._sleeping = False
            waiter.reset()

    def _move_to_new_connection(self) -> bool:
        """Take a connection for the rest (the first, or another after GO_AWAY); the
        requests still on the old one are left to the background reader. False if there is
        none (the rest failed)."""
        old = self.conn
        try:
            self.conn = self._driver.connection(self._target, monotonic() + self.timeout,
                                                self.timeout)
        except RemotingError as exc:
            self._fail_rest(exc)
            return False
        if old is not None:
            with self._lock:
                left = [f for f in self._in_flight.values() if f.conn is old]
            self._driver.make_unattended(old, left)
        return True

    # ------------------------------------------------------------------ the window

    def _pump(self) -> None:
        """Send while the window has room (any thread; never waits); the requests of one
        pump leave together."""
        with self._lock:
            conn = self.conn
            if conn is None:
                return
            conn.hold()
            try:
                self._fill(conn)
            finally:
                conn.flush_held()

    def _fill(self, conn: ThreadConnection) -> None:
        """Send as many requests as the window has room for, `GROUP_FRAMES` at a time (each
        group registered under one lock and handed to the socket together); batch lock
        held."""
        requests = self._requests
        n = len(requests)
        in_flight = self._in_flight
        while True:
            room = min(self._limit - len(in_flight), n - self._next, GROUP_FRAMES)
            if room <= 0:
                break
            if not conn.state.takes_calls or conn.queued_bytes > conn.high_water:
                self._call_owner()
                return
            spare = self._held - len(in_flight)
            if spare < room:
                spare += self._take_permits(room - spare)
                if not spare:
                    if not in_flight:  # nothing of ours would pump again: the owner waits
                        self._needs_permit = True  # for a permit (see run)
                        self._call_owner()
                    return  # (else one of ours frees a permit soon and pumps again)
                room = min(room, spare)
            first = self._next
            deadline = monotonic() + self.timeout
            indexes = range(first, first + room)
            group = [_BatchCall(self, i, requests[i], deadline, conn) for i in indexes]
            in_flight.update(zip(indexes, group, strict=True))
            self._next = first + room
            if not self._driver.send_batch(conn, group,
                                           elsewhere=self.retry_target is not False):
                for fut in group:  # told GO_AWAY since the check above: the owner moves on
                    del in_flight[fut._index]
                self._next = first
                self._call_owner()
                return
        if self._next == n:
            self._give_back_spare()

    def _take_permits(self, wanted: int) -> int:
        """Take up to ``wanted`` more in-flight permits without waiting; return how many."""
        taken = self._driver.async_permits.try_take_many(wanted)
        self._held += taken
        return taken

    def done_one(self, i: int, result: object) -> None:
        """Record the outcome of request ``i`` and send the next one (any thread: the
        reader that completed it holds its connection's sends for the rest of its read)."""
        with self._lock:
            if self._in_flight.pop(i, None) is None:
                return
            self._record(i, result)
            self._refill()

    def answered(self, futs: list[_BatchCall], answers: list[RemotingCommand]) -> None:
        """Record the answers one read brought to ``futs`` (out of the table already, taken
        by the reading thread), then send the next requests once for all of them."""
        with self._lock:
            in_flight = self._in_flight
            results = self.results
            for fut, response in zip(futs, answers, strict=True):
                i = fut._index
                del in_flight[i]  # (out of the table: no one else ends it)
                results[i] = response
                fut._done = True
            if self._finished_at is not None:
                now = monotonic()
                for fut in futs:
                    self._finished_at[fut._index] = now
            self._completed += len(futs)
            self._refill()  # (wakes the calling thread if that was the last)

    def _refill(self) -> None:
        """After completions: fill the window again, and wake the calling thread if it
        sleeps or has to act (batch lock held)."""
        conn = self.conn
        if self._next < len(self._requests) and conn is not None:
            self._fill(conn)
        if self._owner is not None and (self._sleeping or self.done()):
            self._wake_owner()  # (a following owner only when it has to act)

    def _record(self, i: int, result: object) -> None:
        self.results[i] = result
        self._completed += 1
        if self._finished_at is not None:
            self._finished_at[i] = monotonic()
        if self._completed == len(self._requests):
            self._wake_owner()

    def _fail_rest(self, exc: RemotingError) -> None:
        """Fail every request not sent yet."""
        with self._lock:
            n = len(self._requests)
            for i in range(self._next, n):
                self._record(i, exc)
            self._next = n
            self._give_back_spare()

    def _give_back_spare(self) -> None:
        """Give back the permits no request of this batch will use any more."""
        with self._lock:
            spare = self._held - len(self._in_flight)
            if spare > 0 and (self._next == len(self._requests) or not self._in_flight):
                self._held -= spare
                self._driver.async_permits.give_many(spare)

    def _call_owner(self) -> None:
        self._needs_owner = True
        self._wake_owner()

    def _wake_owner(self) -> None:
        owner = self._owner
        if owner is not None:
            owner.wake()


class _BatchCall(ThreadCall):
    """The table entry of one batch request: a `ThreadCall` that only tells its batch.

    It is never handed to users (no callbacks, no thread waits on it: its batch's does), so
    it sets only what the driver reads of a call; its answer is recorded by its batch
    (`ThreadBatch.answered`), any other end by `_complete`.
    """

    __slots__ = ("_index",)
    close_on_timeout = False  # (never set on a batch's call: a class default is enough)

    def __init__(self, batch: ThreadBatch, index: int, request: RemotingCommand,
                 deadline: float, conn: ThreadConnection) -> None:
        # what a batch's request uses of a future, only; made for the connection it is sent on
        self.batch = batch
        self._index = index
        self.request = request
        self.opaque = request.opaque
        self.addr = conn.remote_addr
        self.conn = conn
        self.timeout = batch.timeout
        self.deadline = deadline
        self.retry_target = batch.retry_target
        self.resent = False
        self.unattended = False
        self._done = False
        self._permits = None

    def _complete(self, response: RemotingCommand | None = None,
                  cause: BaseException | None = None) -> bool:
        if self._done:
            return False
        self._done = True
        self.response_command = response
        self.cause = cause
        self.batch.done_one(self._index, response if cause is None else cause)
        return True

    def __repr__(self) -> str:  # (its answer may be only in its batch: no `cause` read)
        return f"<batch request {self._index} opaque={self.opaque} addr={self.addr}>"

