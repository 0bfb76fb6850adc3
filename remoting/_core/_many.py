"""`Batch`: many requests on one target, driven by completions (no task per request).

A window of at most ``limit`` requests is in flight. Each completion (a sync hook on the trio
thread) records its result and sends the next request; when the outbound buffer is over its high
water mark, one task waits for it to drain and resumes sending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from .._errors import RemotingError, RemotingTooManyRequestsError
from ._future import ResponseFuture

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from codec import RemotingCommand

    from ._connection import Connection
    from ._endpoint import Endpoint

__all__ = ["Batch"]


class Batch:
    """One ``invoke_many`` call."""

    def __init__(self, endpoint: Endpoint, target: str | Connection | None,
                 requests: Sequence[RemotingCommand], timeout: float, limit: int,
                 on_done: Callable[[list[Any]], None]) -> None:
        self.endpoint = endpoint
        self.target = target
        self.requests = requests
        self.timeout = timeout
        self.limit = max(1, limit)
        self.on_done: Callable[[list[Any]], None] | None = on_done
        self.results: list[Any] = [None] * len(requests)
        self.conn: Connection | None = None
        self._next = 0
        self._in_flight = 0
        self._completed = 0
        self._pumping = False
        self._waiting = False
        self.release_permit = endpoint.async_permits.release

    def start(self) -> None:
        """Begin sending (trio thread)."""
        ep = self.endpoint
        if not self.requests:
            self._finish()
            return
        conn = ep.live_connection(self.target)
        if conn is not None:
            self.conn = conn
            self._pump()
        elif ep._nursery is None or ep.closed:
            self._fail_rest(RemotingError(f"the {ep.role} is shut down"))
        else:
            ep._nursery.start_soon(self._connect_then_pump)

    async def _connect_then_pump(self) -> None:
        deadline = trio.current_time() + self.timeout
        try:
            self.conn = await self.endpoint.resolve(self.target, deadline, self.timeout)
        except RemotingError as exc:
            self._fail_rest(exc)
            return
        except BaseException:  # shutdown (or a bug): the batch must still end
            self._fail_rest(RemotingError("the endpoint shut down before the batch was sent"))
            raise
        self._pump()

    async def _wait_then_pump(self) -> None:
        conn = self.conn
        assert conn is not None
        try:
            with trio.move_on_after(self.timeout):
                await conn.wait_writable()
        except BaseException:
            self._fail_rest(RemotingError("the endpoint shut down before the batch was sent"))
            raise
        self._waiting = False
        if conn.queued_bytes > conn.high_water and not conn.closed:
            self._fail_rest(RemotingTooManyRequestsError(
                f"the peer did not drain its connection within {self.timeout}s",
                conn.remote_addr))
            return
        self._pump()

    def _fail_rest(self, exc: RemotingError) -> None:
        n = len(self.requests)
        for i in range(self._next, n):
            self.results[i] = exc
        self._completed += n - self._next
        self._next = n
        if self._completed == n:
            self._finish()

    def _pump(self) -> None:
        if self._pumping or self._waiting:
            return
        self._pumping = True
        ep = self.endpoint
        sem = ep.async_permits
        conn = self.conn
        assert conn is not None
        n = len(self.requests)
        try:
            while self._in_flight < self.limit and self._next < n:
                if conn.queued_bytes > conn.high_water and not conn.closed:
                    assert ep._nursery is not None
                    self._waiting = True
                    ep._nursery.start_soon(self._wait_then_pump)
                    break
                i = self._next
                self._next += 1
                try:
                    sem.acquire_nowait()
                except trio.WouldBlock:
                    if self._in_flight:  # one of ours frees a permit soon and pumps again
                        self._next -= 1
                        break
                    self._record(i, RemotingTooManyRequestsError(
                        "no in-flight permit for a batch request; other calls hold them all",
                        conn.remote_addr))
                    continue
                request = self.requests[i]
                self._in_flight += 1
                ep._register_and_write(conn, request, _BatchFuture(
                    self, i, request, conn, trio.current_time() + self.timeout))
        finally:
            self._pumping = False
        if self._completed == n:
            self._finish()

    def _record(self, i: int, result: object) -> None:
        self.results[i] = result
        self._completed += 1

    def _done_one(self, i: int, result: object) -> None:
        self._in_flight -= 1
        self.results[i] = result
        self._completed += 1
        if self._completed == len(self.requests):
            self._finish()
        else:
            self._pump()

    def _finish(self) -> None:
        on_done, self.on_done = self.on_done, None
        if on_done is not None:
            on_done(self.results)


class _BatchFuture(ResponseFuture):
    """The table entry of one batch request: a `ResponseFuture` that only tells its batch.

    It is never handed to users (no waiters, callbacks or threads), so it skips what those need;
    the endpoint completes it like any other future.
    """

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: Batch, index: int, request: RemotingCommand, conn: Connection,
                 deadline: float) -> None:
        self._batch = batch
        self._index = index
        self.request = request
        self.opaque = request.opaque
        self.conn = conn
        self.addr = conn.remote_addr
        self.timeout = batch.timeout
        self.deadline = deadline
        self.response_command = None
        self.cause = None
        self.is_send_request_ok = True
        self.is_timeout = False
        self._done = False
        self.close_on_timeout = False
        self.retry_target = False
        self.resent = False

    def _complete(
        self,
        response: RemotingCommand | None = None,
        cause: BaseException | None = None,
        *,
        timed_out: bool = False,
        send_failed: bool = False,
    ) -> bool:
        if self._done:
            return False
        self._done = True
        self.response_command = response
        self.cause = cause
        self.is_timeout = timed_out
        if send_failed:
            self.is_send_request_ok = False
        batch = self._batch
        batch.release_permit()
        batch._done_one(self._index, response if cause is None else cause)
        return True
