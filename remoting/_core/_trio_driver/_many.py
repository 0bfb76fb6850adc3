"""`Batch`: one ``invoke_many`` call, driven by completions (no task per request).

A window of at most ``limit`` requests is in flight. Each completion (a sync step on the loop)
records its result and sends the next request; when the connection's queue is over its high
water mark, one task waits for it to drain and resumes sending. Every request has its own
deadline; a failed request fails alone, and one answered GO_AWAY is resent once, as any
call (once its connection is told GO_AWAY, the batch sends the rest on another). The batch
holds the in-flight permits of its window (taken as it grows, passed from a finished request
to the next, given back when nothing is left to send), so its requests do not take and give
one each.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..._errors import RemotingError, RemotingTooManyRequestsError
from .._calling._future import ResponseFuture
from .._sansio._permit_errors import batch_got_no_permit

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from codec import RemotingCommand

    from ._channels import ChannelTable, Target
    from ._connection import Connection
    from ._permits import Permits

__all__ = ["Batch", "BatchSender"]


class BatchSender(Protocol):
    """What a batch needs from its invoker."""

    @property
    def role(self) -> str: ...

    @property
    def async_permits(self) -> Permits: ...

    def now(self) -> float: ...

    def send(self, conn: Connection, fut: ResponseFuture, deadline: float,
             permits: Permits | None) -> None: ...

_SHUT_DOWN = "the endpoint shut down before the batch was sent"


class Batch:
    """One ``invoke_many`` call (loop thread only)."""

    def __init__(self, invoker: BatchSender, channels: ChannelTable, target: Target,
                 requests: Sequence[RemotingCommand], timeout: float, limit: int,
                 on_done: Callable[[list[Any]], None],
                 finished_at: list[float] | None = None) -> None:
        self._invoker = invoker
        self._channels = channels
        self._target = target
        # where its requests are resent after GO_AWAY; False: not resendable (a channel's)
        self.retry_target: str | None | bool = (
            target if target is None or isinstance(target, str) else False)
        self._requests = requests
        self.timeout = timeout
        self._limit = max(1, limit)
        self._on_done: Callable[[list[Any]], None] | None = on_done
        self.results: list[Any] = [None] * len(requests)
        # when each outcome was known (`time.monotonic`), if the caller asked (interceptors)
        self._finished_at = finished_at
        if finished_at is not None:
            finished_at[:] = [0.0] * len(requests)
        self._conn: Connection | None = None
        self._nursery: trio.Nursery | None = None
        self._next = 0
        self._in_flight = 0
        self._held = 0  # permits held: at least _in_flight
        self._completed = 0
        self._pumping = False
        self._waiting = False

    def start(self, nursery: trio.Nursery | None) -> None:
        """Begin sending (loop thread); ``nursery`` runs the waits, if any are needed."""
        self._nursery = nursery
        if not self._requests:
            self._finish()
            return
        conn = self._channels.live(self._target)
        if conn is not None:
            self._conn = conn
            self._pump()
        elif nursery is None:
            self._fail_rest(RemotingError(f"the {self._invoker.role} is shut down"))
        else:
            self._wait_in_task(self._connect_then_pump)

    async def _connect_then_pump(self) -> None:
        deadline = self._invoker.now() + self.timeout
        try:
            self._conn = await self._channels.resolve(self._target, deadline, self.timeout)
        except RemotingError as exc:
            self._waiting = False
            self._fail_rest(exc)
            return
        except BaseException:  # shutdown (or a bug): the batch must still end
            self._waiting = False
            self._fail_rest(RemotingError(_SHUT_DOWN))
            raise
        self._waiting = False
        self._pump()

    def _move_off(self) -> Connection | None:
        """Take another connection for the rest (this one was told GO_AWAY); None while
        one is being connected (that task pumps then)."""
        conn = self._channels.live(self._target)
        if conn is not None:
            self._conn = conn
        else:
            self._wait_in_task(self._connect_then_pump)
        return conn

    def _wait_in_task(self, wait: Callable[[], Awaitable[None]]) -> None:
        """Run ``wait`` (connect, or wait for room or a permit, then pump) in a task; the
        batch fails as shut down if the loop is ending (no nursery, or a closed one)."""
        try:
            if self._nursery is None:
                raise RuntimeError(_SHUT_DOWN)
            self._nursery.start_soon(wait)
        except RuntimeError:
            self._fail_rest(RemotingError(_SHUT_DOWN))
            return
        self._waiting = True

    async def _wait_then_pump(self) -> None:
        conn = self._conn
        assert conn is not None
        try:
            with trio.move_on_after(self.timeout):
                await conn.wait_writable()
        except BaseException:
            self._fail_rest(RemotingError(_SHUT_DOWN))
            raise
        self._waiting = False
        if conn.queued_bytes > conn.high_water and not conn.closed and not conn.going_away:
            self._fail_rest(RemotingTooManyRequestsError(
                f"the peer did not drain its connection within {self.timeout}s",
                conn.remote_addr))
            return
        self._pump()

    async def _wait_for_permit_then_pump(self) -> None:
        """Nothing of the batch is in flight and other calls hold every permit: wait for one
        within the request timeout (RocketMQ's ``semaphoreAsync.tryAcquire(timeout)``), then
        pump; past it, the rest fails as too many requests."""
        invoker = self._invoker
        try:
            taken = await invoker.async_permits.take(invoker.now() + self.timeout)
        except BaseException:
            self._fail_rest(RemotingError(_SHUT_DOWN))
            raise
        self._waiting = False
        if not taken:
            self._fail_rest(batch_got_no_permit(
                self.timeout, None if self._conn is None else self._conn.remote_addr))
            return
        self._held += 1
        self._pump()

    def _fail_rest(self, exc: RemotingError) -> None:
        n = len(self._requests)
        for i in range(self._next, n):
            self.results[i] = exc
        if self._finished_at is not None:
            self._finished_at[self._next:n] = [monotonic()] * (n - self._next)
        self._completed += n - self._next
        self._next = n
        self._give_back_spare()
        if self._completed == n:
            self._finish()

    def _give_back_spare(self) -> None:
        """Give back the permits no request of this batch will use any more."""
        permits = self._invoker.async_permits
        while self._held > self._in_flight:
            self._held -= 1
            permits.give()

    def _pump(self) -> None:
        # Re-entered when a send completes its request at once (it cannot be encoded, or its
        # deadline has passed): the outer loop goes on, so the guard keeps one pump running.
        # While a task waits (connect, room), that task pumps when it is done.
        if self._pumping or self._waiting:
            return
        requests = self._requests
        n = len(requests)
        conn = self._conn
        assert conn is not None
        if conn.going_away and self._next < n:
            conn = self._move_off()
            if conn is None:
                return
        self._pumping = True
        invoker = self._invoker
        permits = invoker.async_permits
        now = invoker.now()
        out = conn.outbound
        high = conn.high_water
        try:
            while self._in_flight < self._limit and self._next < n:
                # the queue is read directly (not conn.queued_bytes): this runs per request
                if out.queued + out.in_flight > high and not conn.closed:
                    self._wait_in_task(self._wait_then_pump)
                    break
                i = self._next
                if self._held == self._in_flight:
                    if permits.try_take():
                        self._held += 1
                    elif self._in_flight:  # one of ours frees a permit soon and pumps again
                        break
                    else:  # nothing of ours in flight would pump again: wait for a permit
                        self._wait_in_task(self._wait_for_permit_then_pump)
                        break
                self._next += 1
                self._in_flight += 1
                invoker.send(conn, _BatchFuture(self, i, requests[i], conn), now + self.timeout,
                             None)
            if self._next == n:
                self._give_back_spare()
        finally:
            self._pumping = False
        if self._completed == n:
            self._finish()

    def _record(self, i: int, result: object) -> None:
        self.results[i] = result
        self._completed += 1
        if self._finished_at is not None:
            self._finished_at[i] = monotonic()

    def done_one(self, i: int, result: object) -> None:
        """Record the outcome of request ``i`` and send the next one."""
        self._in_flight -= 1
        self.results[i] = result
        self._completed += 1
        if self._finished_at is not None:
            self._finished_at[i] = monotonic()
        if self._completed == len(self._requests):
            self._finish()
        else:
            self._pump()

    def _finish(self) -> None:
        self._give_back_spare()
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(self.results)


class _BatchFuture(ResponseFuture):
    """The table entry of one batch request: a `ResponseFuture` that only tells its batch.

    It is never handed to users (no waiters, callbacks or threads), so it skips what those
    need; the invoker completes it like any other future.
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: Batch, index: int, request: RemotingCommand,
                 conn: Connection) -> None:
        self._batch = batch
        self._index = index
        self.request = request
        self.opaque = request.opaque
        self.conn = conn
        self.addr = conn.remote_addr
        self.timeout = batch.timeout
        self.response_command = None
        self.cause = None
        self.close_on_timeout = False
        self.retry_target = batch.retry_target
        self.resent = False
        self._done = False
        self._permits = None

    def _complete(self, response: RemotingCommand | None = None,
                  cause: BaseException | None = None) -> bool:
        if self._done:
            return False
        self._done = True
        self.response_command = response
        self.cause = cause
        self._batch.done_one(self._index, response if cause is None else cause)  # its permit
        return True

