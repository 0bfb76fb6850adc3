"""The sending half of `Endpoint`: permits, back-pressure, registration, and calls from threads.

Once a connection and a permit are in hand, sending is synchronous (`send`): encode, register
the future, queue the frame. Awaiting happens only before that: connecting, waiting for a
permit, or waiting for the outbound buffer to drain below its high water mark, all under the
call's single deadline.
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Any, Literal

import trio

from codec import CodecError, RemotingCommand, ResponseCode, encode_frame_parts, next_opaque

from .._errors import (
    RemotingCommandError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTooManyRequestsError,
)
from .._log import log
from ._connection import Connection
from ._future import ResponseFuture
from ._many import Batch

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from concurrent.futures import Executor

    from ._response_table import ResponseTable

__all__ = ["InvokeKind", "Invoker"]

InvokeKind = Literal["sync", "async", "oneway"]
Target = str | Connection | None

BUSY_BACKOFF_FIRST = 0.01  # seconds; doubles up to BUSY_BACKOFF_MAX, with jitter
BUSY_BACKOFF_MAX = 0.2


def _unexpected(exc: BaseException, addr: str | None) -> RemotingError:
    """Turn a cancellation (shutdown) or a bug into the error a caller's future ends with."""
    if isinstance(exc, Exception):
        log.error("request.failed", addr=addr, exc_info=exc)
        err = RemotingError(f"the call failed unexpectedly: {exc!r}", addr)
        err.__cause__ = exc
        return err
    return RemotingError("the endpoint shut down before the request was sent", addr)


async def _connection_or_fail(fut: ResponseFuture, pending: Awaitable[Connection]
                              ) -> Connection | None:
    """Await the connection for ``fut``'s call; on any failure end ``fut`` and return None.

    Cancellation (shutdown) also ends the future, then propagates.
    """
    try:
        return await pending
    except RemotingError as exc:
        fut._fail(exc)
    except BaseException as exc:  # a bug, or shutdown: the future must still end
        fut._fail(_unexpected(exc, fut.addr))
        if not isinstance(exc, Exception):
            raise
    return None


def _call(fn: Callable[[], object]) -> None:
    fn()


def target_addr(target: Target) -> str | None:
    """Return the address a call goes to, as far as known before connecting."""
    return target.remote_addr if isinstance(target, Connection) else target


def busy_backoff(attempt: int) -> float:
    """Return the pause before retry number ``attempt`` (1-based) of a SYSTEM_BUSY reply."""
    base: float = min(BUSY_BACKOFF_MAX, BUSY_BACKOFF_FIRST * 2.0 ** (attempt - 1))
    return base * random.uniform(0.5, 1.0)


class Invoker:
    """Mixin for `Endpoint`: everything that sends requests."""

    role: str
    closed: bool
    loop_thread_id: int | None
    table: ResponseTable
    async_permits: trio.Semaphore
    oneway_permits: trio.Semaphore
    _nursery: trio.Nursery | None
    _timer_scope: trio.CancelScope | None
    _sent: dict[int, int]
    go_away_retry: bool
    close_on_sync_timeout: bool

    def get_callback_executor(self) -> Executor:
        raise NotImplementedError

    def _arm_timer(self, deadline: float) -> None:
        raise NotImplementedError

    async def resolve(self, target: Target, deadline: float, timeout: float) -> Connection:
        raise NotImplementedError

    def live_connection(self, target: Target) -> Connection | None:
        raise NotImplementedError

    def forget_channel(self, conn: Connection) -> None:
        raise NotImplementedError

    @property
    def inbox(self) -> Any:
        raise NotImplementedError

    def call_on_loop(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the trio thread: now if called there, else through the inbox (any
        thread). Returns False, without running it, once the loop has ended."""
        if threading.get_ident() == self.loop_thread_id:
            fn()
            return True
        try:
            self.inbox.post(_call, fn)
        except RuntimeError:  # trio.RunFinishedError
            return False
        return True

    # ------------------------------------------------------------------ waiting phases

    async def _acquire(self, sem: trio.Semaphore, deadline: float, addr: str | None,
                       timeout: float) -> None:
        try:
            sem.acquire_nowait()
            return
        except trio.WouldBlock:
            pass
        with trio.move_on_at(deadline):
            await sem.acquire()
            return
        raise RemotingTooManyRequestsError(
            f"no in-flight permit within {timeout}s ({sem.statistics().tasks_waiting} waiting); "
            "slow down or raise the *_semaphore_value setting", addr,
        )

    async def _wait_writable(self, conn: Connection, deadline: float, timeout: float) -> None:
        if conn.queued_bytes <= conn.high_water:
            return
        with trio.move_on_at(deadline):
            await conn.wait_writable()
        if conn.closed:
            raise RemotingSendRequestError(conn.remote_addr, "connection is closed")
        if conn.queued_bytes > conn.high_water:
            raise RemotingTooManyRequestsError(
                f"{conn.queued_bytes} bytes wait to be sent to a peer that is not reading "
                f"(high water mark {conn.high_water}); gave up after {timeout}s",
                conn.remote_addr,
            )

    async def _prepare(self, target: Target, sem: trio.Semaphore, deadline: float,
                       timeout: float) -> Connection:
        conn = await self.resolve(target, deadline, timeout)
        await self._acquire(sem, deadline, conn.remote_addr, timeout)
        try:
            await self._wait_writable(conn, deadline, timeout)
        except BaseException:
            sem.release()
            raise
        return conn

    # ------------------------------------------------------------------ sending (sync)

    def send(self, conn: Connection, request: RemotingCommand, fut: ResponseFuture,
             deadline: float, sem: trio.Semaphore) -> None:
        """Register ``fut`` and queue ``request`` (trio thread; the permit is held)."""
        fut._permit_release = sem.release
        fut.addr = conn.remote_addr
        fut.deadline = deadline
        self._register_and_write(conn, request, fut)

    def _register_and_write(self, conn: Connection, request: RemotingCommand,
                            fut: ResponseFuture) -> None:
        fut.conn = conn
        while True:
            opaque = request.opaque
            if opaque in self.table.entries:
                opaque = request.opaque = next_opaque()  # the same command sent twice
            try:
                frame = encode_frame_parts(request)
            except CodecError as exc:
                err = RemotingCommandError(f"request cannot be encoded: {exc}", fut.addr)
                err.__cause__ = exc
                fut._fail(err)
                return
            if request.opaque != opaque:  # a thread sending it too changed it meanwhile
                continue
            fut.opaque = opaque
            try:
                self.table.add(fut)
            except ValueError:  # a thread registered this opaque meanwhile
                request.opaque = next_opaque()
                continue
            break
        scope = self._timer_scope  # _arm_timer, inlined (per request)
        if scope is not None and fut.deadline < scope.deadline:
            scope.deadline = fut.deadline
        code = request.code
        self._sent[code] = self._sent.get(code, 0) + 1
        if not conn.write_frame(frame) and self.table.pop_for(fut.opaque, conn) is fut:
            fut._fail_send("connection is closed")

    def send_oneway(self, conn: Connection, request: RemotingCommand,
                    sem: trio.Semaphore) -> None:
        """Queue a oneway request; the permit comes back once it reached the socket.

        Raises:
            RemotingCommandError: it cannot be encoded.
            RemotingSendRequestError: the connection is closed.
        """
        request.flag |= 2
        try:
            frame = encode_frame_parts(request)
        except CodecError as exc:
            sem.release()
            raise RemotingCommandError(f"request cannot be encoded: {exc}",
                                       conn.remote_addr) from exc
        if not conn.write_frame(frame, on_sent=sem.release):
            sem.release()
            raise RemotingSendRequestError(conn.remote_addr, "connection is closed")
        self._sent[request.code] = self._sent.get(request.code, 0) + 1

    def on_go_away(self, fut: ResponseFuture, conn: Connection) -> bool:
        """Handle a GO_AWAY reply; True if it was handled (resent, or failed), False if the
        reply is to be returned as data (resending disabled, as RocketMQ without
        ``enableReconnectForGoAway``)."""
        self.forget_channel(conn)  # new calls open a new connection; this one drains
        if not self.go_away_retry:
            return False
        target = fut.retry_target
        if fut.resent or target is False or target is True or self._nursery is None:
            # as NettyRemotingClient: one resend only; a second GO_AWAY is a send failure
            fut._fail_send("the peer is shutting down (GO_AWAY)"
                           + (", also after one resend" if fut.resent else ""))
            return True
        fut.resent = True
        self._nursery.start_soon(self._resend, target, fut)
        return True

    async def _resend(self, target: Target, fut: ResponseFuture) -> None:
        conn = await _connection_or_fail(fut, self.resolve(target, fut.deadline, fut.timeout))
        if conn is None:
            return
        request = fut.request
        request.opaque = next_opaque()
        fut.addr = conn.remote_addr
        log.info("request.resent", reason="go_away", opaque=request.opaque, peer=fut.addr)
        self._register_and_write(conn, request, fut)

    # ------------------------------------------------------------------ trio-native calls

    def new_future(self, target: Target, request: RemotingCommand, timeout: float,
                   kind: InvokeKind,
                   callback: Callable[[ResponseFuture], object] | None = None,
                   threaded: bool = False) -> ResponseFuture:
        """Create the future of a call (``threaded``: a thread will block on it)."""
        fut = ResponseFuture(request, target_addr(target), timeout, self.get_callback_executor,
                             threaded)
        if not isinstance(target, Connection):
            fut.retry_target = target
        fut.close_on_timeout = kind == "sync" and self.close_on_sync_timeout
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    async def start_invoke(self, target: Target, request: RemotingCommand, timeout: float,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           kind: InvokeKind = "async") -> ResponseFuture:
        """Send ``request``; return its future. Failures are recorded in the future.

        On the fast path (live connection, free permit, socket draining) nothing is awaited.
        """
        deadline = trio.current_time() + timeout
        fut = self.new_future(target, request, timeout, kind, callback)
        if not self._send_now(target, request, fut, deadline, kind):
            await self._start_slow(target, request, timeout, deadline, kind, fut)
        return fut

    async def invoke(self, target: Target, request: RemotingCommand, timeout: float,
                     retry_busy: bool = False) -> RemotingCommand:
        """Send ``request`` and wait for its response (see TrioRemotingClient.invoke_sync)."""
        deadline = trio.current_time() + timeout
        attempt = 0
        while True:
            remaining = timeout if not attempt else deadline - trio.current_time()
            fut = await self.start_invoke(target, request, remaining, kind="sync")
            try:
                response = await fut.wait()
            except BaseException:
                if not fut.done() and self.table.pop_for(fut.opaque, fut.conn) is fut:
                    fut._fail(RemotingError("the call was cancelled", fut.addr))
                raise
            if not retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                return response
            attempt += 1
            pause = busy_backoff(attempt)
            if trio.current_time() + pause >= deadline:
                return response
            await trio.sleep(pause)
            request.opaque = next_opaque()

    async def invoke_oneway(self, target: Target, request: RemotingCommand,
                            timeout: float) -> None:
        """Queue a oneway request (see TrioRemotingClient.invoke_oneway)."""
        deadline = trio.current_time() + timeout
        conn = await self._prepare(target, self.oneway_permits, deadline, timeout)
        self.send_oneway(conn, request, self.oneway_permits)

    async def invoke_many(self, target: Target, requests: Sequence[RemotingCommand],
                          timeout: float, limit: int) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` with at most ``limit`` in flight; results in order."""
        done = trio.Event()
        batch = Batch(self, target, requests, timeout, limit, lambda _: done.set())  # type: ignore[arg-type]
        batch.start()
        await done.wait()
        return batch.results

    # ------------------------------------------------------------------ calls from threads

    def submit_from_thread(
        self, target: Target, request: RemotingCommand, timeout: float,
        kind: InvokeKind, callback: Callable[[ResponseFuture], object] | None = None,
    ) -> ResponseFuture:
        """Hand a call to the trio thread; return its future (any thread but the loop's).

        For ``kind="oneway"`` the future completes (with the request) once the frame is queued.
        """
        fut = self.new_future(target, request, timeout, kind, callback, threaded=True)
        try:
            self.inbox.post(self._start_from_thread, (target, request, timeout, kind, fut))
        except RuntimeError as exc:  # trio.RunFinishedError
            raise RemotingError(f"the {self.role} is shut down", fut.addr) from exc
        return fut

    def _start_from_thread(self, args: tuple[Any, ...]) -> None:
        target, request, timeout, kind, fut = args
        if self.closed or self._nursery is None:
            fut._fail(RemotingError(f"the {self.role} is shut down", fut.addr))
            return
        deadline = trio.current_time() + timeout
        if not self._send_now(target, request, fut, deadline, kind):
            self._nursery.start_soon(self._start_slow, target, request, timeout, deadline, kind,
                                     fut)

    def _send_now(self, target: Target, request: RemotingCommand, fut: ResponseFuture,
                  deadline: float, kind: InvokeKind) -> bool:
        """Send at once if a live connection and a permit are at hand; False if not."""
        conn = self.live_connection(target)
        if conn is None:
            return False
        sem = self.oneway_permits if kind == "oneway" else self.async_permits
        try:
            sem.acquire_nowait()
        except trio.WouldBlock:
            return False
        self._send_kind(conn, request, fut, deadline, sem, kind)
        return True

    async def _start_slow(self, target: Target, request: RemotingCommand, timeout: float,
                          deadline: float, kind: InvokeKind, fut: ResponseFuture) -> None:
        sem = self.oneway_permits if kind == "oneway" else self.async_permits
        conn = await _connection_or_fail(fut, self._prepare(target, sem, deadline, timeout))
        if conn is not None:
            self._send_kind(conn, request, fut, deadline, sem, kind)

    def _send_kind(self, conn: Connection, request: RemotingCommand, fut: ResponseFuture,
                   deadline: float, sem: trio.Semaphore, kind: InvokeKind) -> None:
        if kind != "oneway":
            self.send(conn, request, fut, deadline, sem)
            return
        try:
            self.send_oneway(conn, request, sem)
        except RemotingError as exc:
            fut._fail(exc)
        else:
            fut._complete(request)  # "queued": the blocking caller may return

    def submit_many_from_thread(
        self, target: Target, requests: Sequence[RemotingCommand], timeout: float,
        limit: int, on_done: Callable[[list[Any]], None],
    ) -> None:
        """Start a batch from a thread; ``on_done(results)`` runs on the trio thread."""
        batch = Batch(self, target, requests, timeout, limit, on_done)  # type: ignore[arg-type]
        try:
            self.inbox.post(lambda _: batch.start(), None)
        except RuntimeError as exc:
            raise RemotingError(f"the {self.role} is shut down") from exc
