"""`Invoker`: the calling side of an endpoint. Permits, the response table, sending, deadlines.

Theory of operation (loop thread only; threads come in through `ThreadCalls`):
- A call is a `ResponseFuture`. Once a connection and a permit are in hand, sending is
  synchronous (`send`): encode, register in the table, queue the frame. On the fast path (a
  live connection, a free permit, room in the socket's queue) nothing is awaited and no task
  is started; otherwise connecting, waiting for a permit and waiting for room happen first,
  all under the call's one deadline (`_send_later`).
- Calls from other threads arrive through the inbox, in batches, and take the same path
  (`ThreadCalls`). A call is in the table before its first byte leaves, on every path.
- The caller's command is never changed: a copy with a fresh opaque goes out when a call
  with its opaque is in flight already, and for a resend (SYSTEM_BUSY retry, GO_AWAY).
- Each registered call completes exactly once, by whoever removes it from the table: its
  response (`response_received`), its deadline (`Deadlines`), the loss of its connection
  (`connection_lost`), a failed send, a cancelled wait, or shutdown (`fail_all`).
- Responses that match nothing are counted, and their connection judges them
  (`Connection.orphaned`).
- A GO_AWAY reply (a draining server) is `GoAway`'s: resend once, retire the connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio
from trio.lowlevel import current_task, wait_task_rescheduled

from codec import FLAG_ONEWAY, RemotingCommand, ResponseCode, encode_frame_parts, next_opaque

from ..._errors import (
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    translate,
)
from ..._log import log
from ..._observability._histogram import LatencyHistogram
from .._calling._future import NotifyingFuture, ResponseFuture
from .._sansio._backoff import busy_backoff
from .._sansio._permit_errors import no_permit
from .._sansio._response_table import ResponseTable
from ._channels import target_addr
from ._connection import Connection
from ._deadlines import Deadlines
from ._go_away import GoAway
from ._many import Batch
from ._permits import Permits
from ._thread_calls import ThreadCalls

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from ..._config import ClientConfig, ServerConfig
    from ..._interceptors import ClientCall, RequestKind
    from ..._observability._statistics import Counters
    from .._calling._future import GivesBack
    from .._doors._threads import CallbackRunner, Inbox
    from ._channels import ChannelTable, Target

__all__ = ["Invoker"]

_GO_AWAY: Final = int(ResponseCode.GO_AWAY)  # a plain int compares faster than the enum


class Invoker:
    """Sends requests and completes their futures (see the module docstring)."""

    def __init__(self, role: str, config: ClientConfig | ServerConfig, channels: ChannelTable,
                 counters: Counters, callbacks: CallbackRunner, inbox: Inbox, *,
                 permits: tuple[int, int], go_away_retry: bool,
                 close_on_sync_timeout: bool) -> None:
        self.role = role
        self.max_frame = config.max_frame_bytes  # the peer's limits too, as RocketMQ assumes
        self.max_header = config.max_header_bytes
        self.callbacks = callbacks  # with `inbox`: what futures need (CallSupport)
        self.inbox = inbox
        self.table: ResponseTable[ResponseFuture] = ResponseTable()
        self._take = self.table.pop_for  # an answer's call (bound once: it runs per response)
        async_n, oneway_n = permits
        self.close_on_sync_timeout = close_on_sync_timeout  # clientCloseSocketIfTimeout
        self.async_permits = Permits(async_n)
        self.oneway_permits = Permits(oneway_n)
        self._config = config
        self.channels = channels
        self._counters = counters
        self._nursery: trio.Nursery | None = None
        self.threads: ThreadCalls = ThreadCalls(self, inbox)
        self.go_away = GoAway(self, channels, counters, go_away_retry)
        self.deadlines = Deadlines(self.table, counters, config, self.go_away.call_ended)
        self.now: Callable[[], float] = trio.current_time

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the deadlines until cancelled; calls can start once started."""
        self.now = trio.lowlevel.current_clock().current_time
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.go_away.open(nursery)
            await nursery.start(self.deadlines.run)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:  # before the nursery closes: calls handed over from here on fail at once
                self.close()

    def close(self) -> None:
        """Start no more calls (the loop is ending)."""
        self._nursery = None
        self.go_away.close()

    def fail_all(self, reason: str) -> None:
        """Fail every pending call (shutdown)."""
        for fut in self.table.pop_all():
            fut._fail_send(reason)

    def give_back(self, permits: GivesBack) -> None:
        """Return a permit from a callback thread (only the loop's thread touches permits)."""
        try:
            self.inbox.post(_give, permits)
        except RuntimeError:  # the loop has ended: nobody needs the permit any more
            pass

    # ------------------------------------------------------------------ sending (loop, sync)

    def new_future(self, target: Target, request: RemotingCommand, timeout: float,
                   kind: RequestKind, callback: Callable[[ResponseFuture], object] | None = None,
                   threaded: bool = False) -> ResponseFuture:
        """Create the future of a call (``threaded``: a thread will block on it; any thread)."""
        fut = ResponseFuture(request, target_addr(target), timeout, self, threaded)
        if not isinstance(target, Connection):
            fut.retry_target = target
        if kind == "sync" and self.close_on_sync_timeout:
            fut.close_on_timeout = True
        if callback is not None:
            fut.add_done_callback(callback)
        return fut

    def send(self, conn: Connection, fut: ResponseFuture, deadline: float,
             permits: GivesBack | None) -> None:
        """Register ``fut`` and queue its request on ``conn`` (its permit is held: by the
        call, which gives it back when it completes, or by its batch when None)."""
        fut._permits = permits
        fut.conn = conn
        fut.addr = conn.remote_addr
        fut.deadline = deadline
        if fut.timeout <= 0:  # an expired deadline (call_timeout gives 0): nothing is sent
            fut._fail_timeout()
            return
        table = self.table
        table.register(fut)  # (a copy with an opaque of its own if its opaque is in flight)
        request = fut.request
        try:
            frame = encode_frame_parts(request, self.max_frame, self.max_header)
        except Exception as exc:
            table.pop_for(fut.opaque, conn)
            fut._fail(translate(exc, "encode", fut.addr))
            return
        if deadline < self.deadlines.armed:
            self.deadlines.arm(deadline)
        sent = self._counters.sent
        sent[request.code] = sent.get(request.code, 0) + 1
        if not conn.send(frame) and table.pop_for(fut.opaque, conn) is fut:
            fut._fail_send("connection is closed")

    def send_oneway(self, conn: Connection, request: RemotingCommand, permits: Permits | None,
                    timeout: float) -> None:
        """Queue a oneway request; its permit comes back once it reached the socket (None:
        the caller bounds its oneway requests itself). A copy with the oneway bit set is
        sent: the caller's command is not changed.

        Raises:
            RemotingTimeoutError: ``timeout`` is 0 or less (an expired deadline); not sent.
            RemotingCommandError: it cannot be encoded.
            RemotingSendRequestError: the connection is closed.
        """
        give = None if permits is None else permits.give
        if timeout <= 0:
            if give is not None:
                give()
            raise RemotingTimeoutError(conn.remote_addr, 0.0, "send")
        try:  # a copy, not set-and-restore: a thread may be encoding the same command
            oneway = request.with_opaque(request.opaque)
            oneway.flag = request.flag | FLAG_ONEWAY
            frame = encode_frame_parts(oneway, self.max_frame, self.max_header)
        except Exception as exc:
            if give is not None:
                give()
            raise translate(exc, "encode", conn.remote_addr) from exc
        if not conn.send(frame, give):
            if give is not None:
                give()
            raise RemotingSendRequestError(conn.remote_addr, "connection is closed")
        sent = self._counters.sent
        sent[request.code] = sent.get(request.code, 0) + 1

    def _send_now(self, target: Target, fut: ResponseFuture, deadline: float,
                  kind: RequestKind) -> bool:
        """Send at once if a live connection and a permit are at hand; False if not."""
        conn = self.channels.live(target)
        if conn is None:
            return False
        permits = self.oneway_permits if kind == "oneway" else self.async_permits
        if not permits.try_take():
            return False
        self._send_kind(conn, fut, deadline, permits, kind)
        return True

    def _send_kind(self, conn: Connection, fut: ResponseFuture, deadline: float,
                   permits: Permits, kind: RequestKind) -> None:
        if kind != "oneway":
            self.send(conn, fut, deadline, permits)
            return
        try:
            self.send_oneway(conn, fut.request, permits, fut.timeout)
        except RemotingError as exc:
            fut._fail(exc)
        else:
            fut._complete(fut.request)  # "queued": a blocking caller may return

    async def _send_later(self, target: Target, fut: ResponseFuture, deadline: float,
                          kind: RequestKind) -> None:
        """Connect, take a permit and wait for room, under the deadline; then send. Every
        failure ends ``fut``; cancellation (shutdown) too, and then propagates."""
        permits = self.oneway_permits if kind == "oneway" else self.async_permits
        try:
            conn = await self.prepare(target, permits, deadline, fut.timeout)
        except BaseException as exc:
            self.fail_unsent(fut, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._send_kind(conn, fut, deadline, permits, kind)

    def fail_unsent(self, fut: ResponseFuture, exc: BaseException) -> None:
        """End ``fut``, not sent, with ``exc`` (a bug's exception is logged first)."""
        if isinstance(exc, Exception) and not isinstance(exc, RemotingError):
            log.error("request.failed", addr=fut.addr, exc_info=exc)
        fut._fail(translate(exc, "call", fut.addr))

    async def prepare(self, target: Target, permits: Permits, deadline: float,
                      timeout: float) -> Connection:
        """Connect, take a permit and wait for room in the socket's queue, under ``deadline``.

        Raises:
            RemotingConnectError, RemotingTimeoutError: connecting failed or took too long.
            RemotingTooManyRequestsError: no permit, or no room, before the deadline.
            RemotingSendRequestError: the connection closed meanwhile.
        """
        conn = await self.channels.resolve(target, deadline, timeout)
        if not await permits.take(deadline):
            raise no_permit("oneway" if permits is self.oneway_permits else "async",
                            self.role, timeout, permits.waiting, conn.remote_addr)
        try:
            if conn.queued_bytes > conn.high_water:
                with trio.move_on_at(deadline):
                    await conn.wait_writable()  # also ends when it is told GO_AWAY
                if conn.going_away:  # it may close next, with nothing of this call on it
                    pass  # go elsewhere (below)
                elif conn.closed:
                    raise RemotingSendRequestError(conn.remote_addr, "connection is closed")
                elif conn.queued_bytes > conn.high_water:
                    raise RemotingTooManyRequestsError(
                        f"{conn.queued_bytes} bytes wait to be sent to a peer that is not "
                        f"reading (high water mark {conn.high_water}); gave up after "
                        f"{timeout}s", conn.remote_addr)
        except BaseException:
            permits.give()
            raise
        if conn.going_away:  # told GO_AWAY while this call waited: no new call goes there
            permits.give()
            return await self.prepare(target, permits, deadline, timeout)
        return conn

    # ------------------------------------------------------------------ receiving

    def response_received(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Complete the call ``cmd`` answers (a response read from ``conn``)."""
        fut = self._take(cmd.opaque, conn)
        if fut is None:
            self._counters.orphans += 1
            conn.orphaned(cmd)
            return
        if cmd.code == _GO_AWAY and self.go_away.received(fut, conn):
            return
        # received at the time of the read that brought it (saves a clock call per response)
        latency = self._counters.latency
        code = fut.request.code
        hist = latency.get(code)
        if hist is None:
            hist = latency[code] = LatencyHistogram()
        hist.record(conn.last_activity - (fut.deadline - fut.timeout))
        fut._complete(cmd)

    def connection_lost(self, conn: Connection) -> None:
        """Fail every call pending on ``conn`` at once (RocketMQ's failFast)."""
        self.go_away.connection_closed(conn)
        for fut in self.table.pop_connection(conn):
            reason = conn.close_reason or f"the {self.role} shut down"
            fut._fail(RemotingSendRequestError(fut.addr, reason, connection_lost=True))

    # ------------------------------------------------------------------ the trio face's driver

    # Plain functions that return the coroutine to await, not coroutines awaiting it: every
    # suspension and resumption of a call passes through each frame of its await chain, and a
    # frame less here is measurable with 64 calls in flight (bench/ab.py, trio client rows).

    def call_sync(self, call: ClientCall) -> Coroutine[Any, Any, RemotingCommand]:
        """`invoke`, for `Caller`."""
        return self.invoke(call.target, call.request, call.timeout,  # type: ignore[arg-type]
                           call.retry_busy)

    def call_async(self, call: ClientCall) -> Coroutine[Any, Any, ResponseFuture]:
        """`start_call`, for `Caller`."""
        return self.start_call(call.target, call.request,  # type: ignore[arg-type]
                               call.timeout, call.callback)

    def call_oneway(self, call: ClientCall) -> Coroutine[Any, Any, None]:
        """`invoke_oneway`, for `Caller`."""
        return self.invoke_oneway(call.target, call.request,  # type: ignore[arg-type]
                                  call.timeout)

    def call_many(self, call: ClientCall
                  ) -> Coroutine[Any, Any, list[RemotingCommand | RemotingError]]:
        """`invoke_many`, for `Caller`."""
        return self.invoke_many(call.target, call.requests,  # type: ignore[arg-type]
                                call.timeout, call.limit, call.finished_at)

    # ------------------------------------------------------------------ trio-native calls

    async def invoke(self, target: Target, request: RemotingCommand, timeout: float,
                     retry_busy: bool = False) -> RemotingCommand:
        """Send ``request`` and wait for its response (see TrioRemotingClient.invoke_sync)."""
        deadline = self.now() + timeout
        attempt = 0
        while True:
            fut = self.new_future(target, request, timeout, "sync")
            if not self._send_now(target, fut, deadline, "sync"):
                await self._send_later(target, fut, deadline, "sync")
            if not fut._done:  # park this task on the call itself (see ResponseFuture._park)
                try:
                    await wait_task_rescheduled(fut._park(current_task()))
                except BaseException:
                    self._abandon(fut)
                    raise
            response = fut._outcome()
            if not retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                return response
            attempt += 1
            pause = busy_backoff(attempt)
            if self.now() + pause >= deadline:
                return response
            await trio.sleep(pause)
            request = request.with_opaque(next_opaque())  # a new call: never the caller's
            timeout = deadline - self.now()

    def _abandon(self, fut: ResponseFuture) -> None:
        """A caller stopped waiting (cancelled): remove its call; a late answer is dropped."""
        if not fut.done() and self.table.pop_for(fut.opaque, fut.conn) is fut:
            fut.conn.abandoned += 1
            fut._fail(RemotingError("the call was cancelled", fut.addr))
            if fut.conn.going_away:
                self.go_away.call_ended(fut)

    async def start_call(self, target: Target, request: RemotingCommand, timeout: float,
                         callback: Callable[[ResponseFuture], object] | None = None,
                         ) -> ResponseFuture:
        """Send ``request``; return its future. Failures end up in the future."""
        deadline = self.now() + timeout
        fut = self.new_future(target, request, timeout, "async", callback)
        if not self._send_now(target, fut, deadline, "async"):
            await self._send_later(target, fut, deadline, "async")
        return fut

    async def invoke_oneway(self, target: Target, request: RemotingCommand,
                            timeout: float) -> None:
        """Queue a oneway request (see TrioRemotingClient.invoke_oneway)."""
        permits = self.oneway_permits
        conn = self.channels.live(target)
        if conn is None or not permits.try_take():
            conn = await self.prepare(target, permits, self.now() + timeout, timeout)
        self.send_oneway(conn, request, permits, timeout)

    async def invoke_many(self, target: Target, requests: Sequence[RemotingCommand],
                          timeout: float, limit: int, finished_at: list[float] | None = None
                          ) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` with at most ``limit`` in flight; results in order
        (``finished_at``: filled with the instant of each outcome, `time.monotonic`)."""
        done = trio.Event()
        batch = Batch(self, self.channels, target, requests, timeout, limit,
                      lambda _: done.set(), finished_at)
        batch.start(self._nursery)
        await done.wait()
        return batch.results

    # ------------------------------------------------------------------ bounded by their caller

    def notify(self, conn: Connection, request: RemotingCommand, timeout: float,
               on_done: Callable[[RemotingCommand | None, BaseException | None], object]
               ) -> None:
        """Send ``request`` on ``conn`` with no in-flight permit (its caller bounds what it
        has in flight); ``on_done(response, cause)`` runs once, on the loop thread, with the
        response or what ended the call: not sent (`RemotingCommandError`, a closed
        connection), its connection lost, its deadline. Loop thread only; starts no task."""
        fut = NotifyingFuture(request, conn.remote_addr, timeout, on_done)
        self.send(conn, fut, self.now() + timeout, None)

    # ------------------------------------------------------------------ started by threads

    def start(self, target: Target, fut: ResponseFuture, kind: RequestKind) -> None:
        """Send a call a thread handed over (`_thread_calls`), now or in a task."""
        nursery = self._nursery
        if nursery is None:
            fut._fail(RemotingError(f"the {self.role} is shut down", fut.addr))
            return
        deadline = self.now() + fut.timeout
        if not self._send_now(target, fut, deadline, kind):
            nursery.start_soon(self._send_later, target, fut, deadline, kind)

    def start_batch(self, target: Target, requests: Sequence[RemotingCommand], timeout: float,
                    limit: int, on_done: Callable[[list[Any]], None],
                    finished_at: list[float] | None = None) -> None:
        """Start an ``invoke_many`` batch a thread handed over; ``on_done(results)`` runs
        here, on the loop thread."""
        Batch(self, self.channels, target, requests, timeout, limit, on_done,
              finished_at).start(self._nursery)



def _give(permits: GivesBack) -> None:
    permits.give()
