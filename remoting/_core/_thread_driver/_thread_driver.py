"""`ThreadDriver`: a `RemotingClient`'s calls driven from the calling threads (``io="threads"``).

Theory of operation (docs/architecture.md, "The thread driver"):
- It runs the same sans-I/O parts as the trio driver: the codec, a `ResponseTable` of pending
  calls and its deadline heap, each connection's `ConnectionCore` and `Outbound` queue, the
  `AddressList`, and the call kinds of `Caller` (hooks, interceptors, telemetry); only who
  runs them differs. There is no loop thread: the calling thread connects, registers its call
  before its first byte leaves and sends it (`PendingCalls`, `_pending_calls`: how calls are
  registered and found again), and waits by driving the connection (`ThreadConnection.wait`:
  who reads is `ReadRole`'s, `_read_role`; how frames leave, `ThreadSender`'s).
- One lock (``_lock``, `PendingCalls.lock`) guards the calls in flight and what is counted
  with them, the connections and the calling side's counters; it is held around bookkeeping
  only, never around I/O or a completion. Whoever removes a call from the table completes
  it, outside the lock, so every call ends exactly once.
- Timeouts run on one clock, `time.monotonic`: a waiting thread ends its own call at its
  deadline (``precise_timeouts``; else ``scan_grace`` later, as RocketMQ's scan); the
  `BackgroundReader` ends the calls nobody waits for at theirs, and reads their answers.
- Calls nobody waits for (``invoke_async``; a batch's requests left on a connection it moved
  off) are counted on their connection, so that a reader leaving it hands it to the
  background reader. A thread that waits for such a future later (``result()``) reads too.
- GO_AWAY is `ThreadGoAway`'s (`_thread_go_away`).
- The server's requests on these connections are handed to the `Receiver`, which runs them in
  order on a loop thread started only then (`_request_loop`); it is told when a
  connection closes (the streams on it end).
"""

from __future__ import annotations

import time
from time import monotonic
from typing import TYPE_CHECKING, Final, Protocol

from codec import (
    FLAG_ONEWAY,
    RemotingCommand,
    ResponseCode,
    encode_frame_parts,
    next_opaque,
)
from processors import RequestContext

from ..._errors import (
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    translate,
)
from ..._log import log
from ..._observability._statistics import EndpointStatistics, ReceivingStatistics
from ..._security._tls import client_context
from .._calling._future import ResponseFuture, thread_waiter
from .._receiving._channel_handle import ChannelHandle
from .._sansio._backoff import busy_backoff
from .._sansio._permit_errors import no_permit
from ._background_reader import BackgroundReader
from ._pending_calls import PendingCalls, ThreadCall
from ._socket_io import TLSIO, SocketIO, dial
from ._thread_batch import ThreadBatch
from ._thread_channels import ThreadChannels, ThreadTarget
from ._thread_connection import ThreadConnection
from ._thread_go_away import ThreadGoAway
from ._thread_permits import ThreadPermits
from ._thread_sender import DEFER_SECONDS

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..._config import ClientConfig
    from ..._interceptors import ClientCall
    from ..._observability._statistics import Counters
    from .._calling._future import GivesBack
    from .._doors._threads import CallbackRunner
    from .._events import EventDispatcher
    from ._pending_calls import Batch

__all__ = ["Receiver", "ThreadDriver", "ThreadHost"]

_GO_AWAY: Final = int(ResponseCode.GO_AWAY)
SWEEP_SECONDS: Final = 1.0  # how often idle, stalled and drained connections are looked at
# Extra seconds a thread waits past its call's deadline for the job resending it (GO_AWAY),
# which ends it by that deadline itself, before it ends the call.
RESEND_WAIT_SLACK: Final = 5.0
# A connection nobody reads is looked at (a zero-wait poll: has the server closed it?) before
# a call uses it, unless something was read from it this recently: the server was alive then,
# and a close in between is a race no look can win anyway. Back-to-back calls (every call
# reads its answer) so save a system call each; a connection left alone longer is looked at.
PEEK_AFTER_SECONDS: Final = 0.01


class ThreadHost(Protocol):
    """What the thread driver needs from its endpoint (and hands to channel handles)."""

    @property
    def counters(self) -> Counters: ...

    @property
    def callbacks(self) -> CallbackRunner: ...

    @property
    def events(self) -> EventDispatcher: ...


class Receiver(Protocol):
    """Where the server's requests run (`_request_loop.RequestLoop`)."""

    def serves(self) -> bool:
        """True if the server's requests are read at any time, not only while a call waits."""
        ...

    def serve(self, conn: ThreadConnection, requests: list[RemotingCommand]) -> None:
        """Run ``requests``, read from ``conn``, in order (any thread)."""
        ...

    def connection_lost(self, conn: ThreadConnection) -> None:
        """``conn`` is closed: end what the receiving side has on it (its streams)."""
        ...


class ThreadDriver:
    """The calling side of a thread-driven client (see the module docstring)."""

    def __init__(self, host: ThreadHost, config: ClientConfig, receiver: Receiver) -> None:
        self.role = "client"
        self._host = host
        self._config = config
        self._counters = counters = host.counters
        self.callbacks = host.callbacks
        self._events = host.events
        self._receiver = receiver
        self.max_frame = config.max_frame_bytes
        self.max_header = config.max_header_bytes  # the peer's too, as RocketMQ assumes
        self._close_on_timeout = config.close_socket_if_timeout
        self._grace = 0.0 if config.precise_timeouts else config.scan_grace
        self._tls = client_context(config)
        self._unverified_warned: set[str] = set()  # addresses told tls.verification_skipped
        self.async_permits = ThreadPermits(config.client_async_semaphore_value)
        self.oneway_permits = ThreadPermits(config.client_oneway_semaphore_value)
        self.connections: set[ThreadConnection] = set()
        self.channels = ThreadChannels(config.connect_timeout, self._open)
        self.background = BackgroundReader("remoting-client-reader", self)
        self.pending = pending = PendingCalls(
            counters, self.background, max_frame=self.max_frame, max_header=self.max_header,
            grace=self._grace)
        self._lock = pending.lock  # one lock (see the module docstring)
        self.table = pending.table
        # what a batch and a resend ask of the calls in flight: straight to them
        self.send_batch = pending.send_batch
        self.next_deadline = pending.next_deadline
        self.make_unattended = pending.make_unattended
        self.go_away = ThreadGoAway(self, pending, self.channels, self.background,
                                    self.callbacks, counters,
                                    retry=config.enable_reconnect_for_go_away)
        self.closed = False
        self._next_sweep = 0.0

    # ------------------------------------------------------------------ the blocking driver

    def call_sync(self, call: ClientCall) -> RemotingCommand:
        """Send and wait, driving the connection meanwhile (see `RemotingClient.invoke_sync`)."""
        return self.invoke(call.target, call.request, call.timeout,  # type: ignore[arg-type]
                           call.retry_busy)

    def invoke(self, target: ThreadTarget, request: RemotingCommand, timeout: float,
               retry_busy: bool) -> RemotingCommand:
        """`call_sync` of checked arguments (`Caller`'s direct path takes this door too)."""
        deadline = monotonic() + timeout
        attempt = 0
        while True:
            fut, reading = self._start(target, request, timeout, deadline, "sync", None)
            if reading:  # this thread holds the read role of its connection: it reads next
                fut.conn.wait(fut, deadline + self._grace, reading=True)
            if not fut._done:
                self._await(fut, deadline + self._grace, expire=True)
            response = fut._outcome()
            if not retry_busy or response.code != ResponseCode.SYSTEM_BUSY:
                return response
            attempt += 1
            pause = busy_backoff(attempt)
            if monotonic() + pause >= deadline:
                return response
            time.sleep(pause)
            request = request.with_opaque(next_opaque())  # a new call: never the caller's
            timeout = deadline - monotonic()

    def call_async(self, call: ClientCall) -> ResponseFuture:
        """Send; return the future at once (see `RemotingClient.invoke_async`)."""
        return self.start_call(call.target, call.request, call.timeout,  # type: ignore[arg-type]
                               call.callback)

    def start_call(self, target: ThreadTarget, request: RemotingCommand, timeout: float,
                   callback: Callable[[ResponseFuture], object] | None) -> ResponseFuture:
        """`call_async` of checked arguments (`Caller`'s direct path takes this door too)."""
        return self._start(target, request, timeout, monotonic() + timeout, "async",
                           callback)[0]

    def call_oneway(self, call: ClientCall) -> None:
        """Queue a oneway request and return (see `RemotingClient.invoke_oneway`)."""
        self.invoke_oneway(call.target, call.request, call.timeout)  # type: ignore[arg-type]

    def invoke_oneway(self, target: ThreadTarget, request: RemotingCommand, timeout: float
                      ) -> None:
        """`call_oneway` of checked arguments (`Caller`'s direct path takes this door too)."""
        deadline = monotonic() + timeout
        conn = self.connection(target, deadline, timeout)
        if timeout <= 0:
            raise RemotingTimeoutError(conn.remote_addr, 0.0, "send")
        permits = self.oneway_permits
        if not permits.take(deadline):
            raise no_permit("oneway", self.role, timeout, permits.waiting, conn.remote_addr)
        try:
            conn = self._room(conn, target, deadline, timeout)
            oneway = request.with_opaque(request.opaque)  # a copy: the caller's stays as is
            oneway.flag = request.flag | FLAG_ONEWAY
            frame = encode_frame_parts(oneway, self.max_frame, self.max_header)
        except RemotingError:
            permits.give()
            raise
        except Exception as exc:
            permits.give()
            raise translate(exc, "encode", conn.remote_addr) from exc
        if not conn.send(frame, permits.give):
            permits.give()
            raise RemotingSendRequestError(conn.remote_addr, "connection is closed")
        self.pending.count_oneway(request.code)

    def call_many(self, call: ClientCall) -> list[RemotingCommand | RemotingError]:
        """Send a batch and wait for all of it, driving the connection (see
        `RemotingClient.invoke_many`)."""
        return ThreadBatch(self, call.target, call.requests, call.timeout,  # type: ignore[arg-type]
                           call.limit, call.finished_at).run()

    def give_back(self, permits: GivesBack) -> None:
        """Return a permit after an async call's callbacks ran (any thread)."""
        permits.give()

    # ------------------------------------------------------------------ starting a call

    def connection(self, target: ThreadTarget, deadline: float, timeout: float
                   ) -> ThreadConnection:
        """Return a live connection for ``target``, connecting within ``deadline``.

        Raises:
            RemotingError: as `ThreadChannels.get`, or the client is shut down.
        """
        conn, reading = self._connection(target, deadline, timeout, keep_reading=False)
        return conn

    def _connection(self, target: ThreadTarget, deadline: float, timeout: float, *,
                    keep_reading: bool) -> tuple[ThreadConnection, bool]:
        """`connection`, and whether the calling thread holds its read role (taken if free,
        kept with ``keep_reading``: a sync call reads its answer next)."""
        if self.closed:
            raise RemotingError("the client is shut down", target_addr(target))
        conn = self.channels.live(target)
        if conn is not None and not conn.background_events and conn.claim_read():
            if monotonic() - conn.last_read >= PEEK_AFTER_SECONDS:
                conn.peek()  # nobody read it lately: the server may have closed it meanwhile
            if conn.state.takes_calls and keep_reading:
                return conn, True
            conn.release_read()
            if not conn.state.takes_calls:
                conn = None
        if conn is None:
            conn = self.channels.get(target, deadline, timeout)
        return conn, False

    def _start(self, target: ThreadTarget, request: RemotingCommand, timeout: float,
               deadline: float, kind: str,
               callback: Callable[[ResponseFuture], object] | None
               ) -> tuple[ThreadCall, bool]:
        """Create a call's future and send it; every failure ends up in the future. Return
        it, and whether the calling thread holds the read role of its connection (a sync
        call that found nobody reading it: the thread then reads its answer itself)."""
        fut = ThreadCall(request, target_addr(target), timeout, self)
        if not isinstance(target, ThreadConnection):
            fut.retry_target = target
        if kind == "sync" and self._close_on_timeout:
            fut.close_on_timeout = True
        if callback is not None:
            fut.add_done_callback(callback)
        fut.deadline = deadline
        if timeout <= 0:  # an expired deadline (call_timeout gives 0): nothing is sent
            fut._fail_timeout()
            return fut, False
        permits = None
        elsewhere = not isinstance(target, ThreadConnection)
        while True:
            reading = False
            try:
                conn, reading = self._connection(target, deadline, timeout,
                                                 keep_reading=kind == "sync")
                if kind == "async" and permits is None:
                    permits = self.async_permits
                    if not permits.take(deadline):
                        permits = None
                        raise no_permit("async", self.role, timeout,
                                        self.async_permits.waiting, conn.remote_addr)
                if conn.queued_bytes > conn.high_water:
                    if reading:  # waiting for room: others read meanwhile
                        conn.release_read()
                        reading = False
                    conn = self._room(conn, target, deadline, timeout)
            except BaseException as exc:
                if reading:
                    conn.release_read()
                if permits is not None:
                    permits.give()
                if not isinstance(exc, Exception):
                    raise
                self.fail_unsent(fut, exc)
                return fut, False
            if self.pending.send(conn, fut, permits, unattended=kind == "async",
                                 elsewhere=elsewhere):
                break
            if reading:  # told GO_AWAY since it was taken: take another
                conn.release_read()
        if reading and fut._done:  # not sent
            conn.release_read()
            return fut, False
        return fut, reading

    def _room(self, conn: ThreadConnection, target: ThreadTarget, deadline: float,
              timeout: float) -> ThreadConnection:
        """Wait for room below the high water mark on ``conn`` within ``deadline``; if it
        is told GO_AWAY meanwhile, no new call goes there: take another connection for
        ``target`` (a channel's call has no other). Return the connection to send on.

        Raises:
            RemotingTooManyRequestsError: no room in time; RemotingError: as `connection`.
        """
        conn.wait_for_room(deadline)
        while conn.going_away and not isinstance(target, ThreadConnection):
            conn = self.connection(target, deadline, timeout)
            conn.wait_for_room(deadline)
        return conn

    def connection_with_room(self, target: ThreadTarget, deadline: float, timeout: float
                             ) -> ThreadConnection:
        """`connection`, then room below its high water mark (see `_room`)."""
        return self._room(self.connection(target, deadline, timeout), target, deadline,
                          timeout)

    def fail_unsent(self, fut: ResponseFuture, exc: BaseException) -> None:
        """End ``fut``, not sent, with ``exc`` (a bug's exception is logged first)."""
        if isinstance(exc, Exception) and not isinstance(exc, RemotingError):
            log.error("request.failed", addr=fut.addr, exc_info=exc)
        fut._fail(translate(exc, "call", fut.addr))

    # ------------------------------------------------------------------ waiting

    def await_call(self, fut: ResponseFuture, timeout: float | None) -> None:
        """Wait for ``fut`` on the calling thread (``ResponseFuture.result``): drive its
        connection until it is done, ``timeout`` seconds pass (None: its deadline, where
        it ends as timed out)."""
        if timeout is None:
            self._await(fut, fut.deadline + self._grace, expire=True)
        else:
            self._await(fut, monotonic() + timeout, expire=False)

    def _await(self, fut: ResponseFuture, until: float, *, expire: bool) -> None:
        while not fut._done:
            if monotonic() >= until:
                break
            conn = fut.conn
            if isinstance(conn, ThreadConnection):
                conn.wait(fut, until)
            else:  # being resent (GO_AWAY): the job sends it, its completion wakes us
                _sleep_until_done(fut, until)
        if fut._done or not expire:
            return
        if self.pending.remove(fut, fut.conn):
            self.pending.timed_out(fut)
            self._timed_out(fut)
            return
        _sleep_until_done(fut, monotonic() + RESEND_WAIT_SLACK)  # its resend ends it
        fut._fail_timeout()  # (a no-op if it did)

    def expire_due(self, now: float) -> None:
        """End every call whose deadline (grace included) is at or before ``now``."""
        for fut in self.pending.expire(now):
            self._timed_out(fut)

    def _timed_out(self, fut: ResponseFuture) -> None:
        """Fail ``fut`` (out of the table, counted) for its deadline."""
        conn = fut.conn
        log.debug("request.timed_out", opaque=fut.opaque, addr=fut.addr, timeout=fut.timeout)
        fut._fail_timeout()
        if conn is None:
            return
        if conn.going_away:
            self.go_away.settle(conn)
        if fut.close_on_timeout:
            conn.close("invoke_sync timed out (close_socket_if_timeout)")

    # ------------------------------------------------------------------ what connections tell

    @property
    def serves_requests(self) -> bool:
        """True if the server's requests are read at any time (processors registered)."""
        return self._receiver.serves()

    def responses_received(self, conn: ThreadConnection, responses: list[RemotingCommand]
                           ) -> None:
        """Complete the calls ``responses`` (one read's) answer, on the thread that read
        them: all taken out of the table at once, then completed one by one, except a
        batch's, handed to their batch together (it sends its next requests once)."""
        if len(responses) == 1:  # one answer: nothing to group (`PendingCalls.answered_one`)
            response = responses[0]
            fut = self.pending.answered_one(conn, response)
            if fut is None:
                self._orphaned(conn, responses)
            elif fut.batch is None or response.code == _GO_AWAY:
                self._answer(conn, fut, response)
            else:
                self._batch_answered(conn, fut.batch, [fut], responses)
            return
        answered = self.pending.answered(conn, responses)
        for fut, response in answered.singles:
            self._answer(conn, fut, response)
        for batch, (futs, answers) in answered.batches.items():
            self._batch_answered(conn, batch, futs, answers)
        if answered.orphans:
            self._orphaned(conn, answered.orphans)

    def _answer(self, conn: ThreadConnection, fut: ThreadCall, response: RemotingCommand
                ) -> None:
        """Complete ``fut``, a single call taken out of the table, with ``response`` (one
        answered GO_AWAY may be resent instead)."""
        if response.code == _GO_AWAY and self.go_away.received(fut, conn):
            self.go_away.settle(conn)  # that may have been its last call
            return
        fut._complete(response)
        if conn.going_away:
            self.go_away.settle(conn)

    def _batch_answered(self, conn: ThreadConnection, batch: Batch, futs: list[ThreadCall],
                        answers: list[RemotingCommand]) -> None:
        """Hand ``batch`` its calls ``futs``, taken out of the table, with their ``answers``."""
        batch.answered(futs, answers)
        if conn.going_away:
            self.go_away.settle(conn)

    def _orphaned(self, conn: ThreadConnection, orphans: list[RemotingCommand]) -> None:
        """Count the answers that matched no call, each closer to condemning ``conn``."""
        for response in orphans:
            if conn.closed:  # condemned by an orphan before it: the rest is not looked at
                break
            self.pending.count_orphan()
            conn.orphaned(response)

    def requests_received(self, conn: ThreadConnection, requests: list[RemotingCommand]
                          ) -> None:
        """Hand the server's requests to the owner (which runs their processors)."""
        self._receiver.serve(conn, requests)

    def background_wanted(self, conn: ThreadConnection) -> None:
        """Let the background reader read or send what ``conn`` has left."""
        self.background.want(conn)

    def flush_soon(self, conn: ThreadConnection) -> None:
        """Let the background reader send what waits on ``conn`` for its reader, soon."""
        self.background.flush_soon(conn, monotonic() + DEFER_SECONDS)

    def connection_closed(self, conn: ThreadConnection) -> None:
        """Forget ``conn`` and fail its pending calls at once (RocketMQ's failFast)."""
        with self._lock:
            self.connections.discard(conn)
            counters = self._counters  # what it read and wrote, folded in
            counters.bytes_read += conn.bytes_read
            counters.bytes_written += conn.bytes_written
            counters.writes += conn.writes
            counters.frames_written += conn.frames_written
            counters.sent_by_threads += conn.frames_written
            gone = self.pending.connection_lost(conn)
        self.channels.forget(conn)
        reason = conn.close_reason or "the client shut down"
        for fut in gone:
            fut._fail(RemotingSendRequestError(fut.addr, reason, connection_lost=True))
        self._receiver.connection_lost(conn)
        events = self._events
        if conn.state.broken:
            events.emit("exception", conn.remote_addr, conn.channel)
        events.emit("close", conn.remote_addr, conn.channel)

    # ------------------------------------------------------------------ connections

    def _open(self, addr: str, host: str, port: int, deadline: float) -> ThreadConnection:
        """Connect to ``addr`` (TLS if configured) before ``deadline``: a live connection.

        Raises:
            OSError, ssl.SSLError: the connect or the handshake failed (TimeoutError: late).
        """
        if self._tls is not None and not self._config.tls_verify:
            with self._lock:
                first = addr not in self._unverified_warned
                self._unverified_warned.add(addr)
            if first:
                log.warning("tls.verification_skipped", peer=addr,
                            reason="tls_verify=False: any certificate is accepted")
        sock = dial(host, port, deadline)
        try:
            io = (SocketIO(sock) if self._tls is None else TLSIO.handshake(
                sock, self._tls, self._config.tls_server_hostname or host, deadline))
        except BaseException:
            sock.close()
            raise
        conn = ThreadConnection(io, addr, self, self._config, addr_key=addr)
        conn.channel = channel = ChannelHandle(conn, self._host)  # type: ignore[arg-type]
        conn.ctx = RequestContext(remote_addr=addr, channel=channel,
                                  peer_certificate_subject=io.peer_certificate_subject)
        with self._lock:
            self.connections.add(conn)
            self._counters.connections_opened += 1
        log.info("connection.opened", conn_id=conn.id, peer=addr, role="client")
        self._events.emit("connect", addr, channel)
        self.background.start()  # its sweep watches idle and half-closed connections
        if self.serves_requests:
            self.background.want(conn)
        return conn

    # ------------------------------------------------------------------ background duties

    def next_timer(self) -> float:
        """When the background reader runs `on_timer` next."""
        return min(self.next_deadline(), self._next_sweep)

    def on_timer(self, now: float) -> None:
        """End the calls past their deadlines; every `SWEEP_SECONDS`, look at each
        connection: a read nobody does (a half-closed socket, a push), an idle one, a stalled
        frame, one told GO_AWAY that is done."""
        self.expire_due(now)
        if now < self._next_sweep:
            return
        idle = self._config.max_idle_seconds
        self._next_sweep = now + (min(SWEEP_SECONDS, idle / 10) if idle else SWEEP_SECONDS)
        with self._lock:
            conns = list(self.connections)
        for conn in conns:
            if conn.closed:
                continue
            if idle and conn.is_idle(now, idle):
                log.info("connection.idle", conn_id=conn.id, peer=conn.remote_addr,
                         idle_seconds=idle)
                self._events.emit("idle", conn.remote_addr, conn.channel)
                conn.close(f"idle for {idle}s")
                continue
            conn.check_stalled(now)
            if conn.read_free:
                conn.read_now()
            if conn.going_away:
                self.go_away.settle(conn)

    # ------------------------------------------------------------------ lifecycle

    def in_flight(self) -> int:
        """Calls sent and waiting for their response."""
        return len(self.table)

    def live_connections(self) -> list[ThreadConnection]:
        """The connections open now."""
        with self._lock:
            return list(self.connections)

    def unfolded_bytes(self) -> tuple[int, int]:
        """Bytes read and written on the connections open now (each closing connection's
        are folded into the counters)."""
        conns = self.live_connections()
        return (sum(conn.bytes_read for conn in conns),
                sum(conn.bytes_written for conn in conns))

    def watch_all(self) -> None:
        """Read every connection when nobody waits (a processor was registered: the
        server's requests may come at any time)."""
        with self._lock:
            conns = list(self.connections)
        for conn in conns:
            self.background.want(conn)

    def set_addresses(self, addrs: list[str]) -> None:
        """Replace the address list (any thread)."""
        self.channels.set_addresses(addrs)

    def close(self) -> None:
        """Shut down: close every connection, fail every pending call, stop the background
        reader (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            conns = list(self.connections)
        self.channels.close()
        for conn in conns:
            conn.close("the client shut down")
        left = self.pending.pop_all()
        for fut in left:
            fut._fail_send("client shut down")
        self.background.stop()

    def statistics(self, receiving: ReceivingStatistics) -> EndpointStatistics:
        """Return a snapshot of the calling side's counters, with ``receiving``'s (the
        server's requests, counted by the loop that processes them)."""
        c = self._counters
        with self._lock:
            conns = list(self.connections)
            return EndpointStatistics(
                connections=len(conns),
                connecting=self.channels.connecting,
                connections_opened=c.connections_opened,
                in_flight=len(self.table),
                requests_sent=dict(c.sent),
                requests_received=receiving.requests_received,
                error_replies=receiving.error_replies,
                timeouts=c.timeouts,
                orphaned_responses=c.orphans,
                processor_queue=receiving.processor_queue,
                processing=receiving.processing,
                latency=c.latency_summary(),
                dropped_events=self._events.dropped,
                async_permits_free=self.async_permits.free,
                oneway_permits_free=self.oneway_permits.free,
                queued_bytes=sum(conn.queued_bytes for conn in conns),
                writes=c.writes + sum(conn.writes for conn in conns),
                frames_written=c.frames_written + sum(conn.frames_written for conn in conns),
                sent_by_threads=c.sent_by_threads + sum(conn.frames_written for conn in conns),
                bytes_read=c.bytes_read + sum(conn.bytes_read for conn in conns),
                bytes_written=c.bytes_written + sum(conn.bytes_written for conn in conns),
                go_away_received=c.go_away,
                requests_dropped=receiving.requests_dropped,
            )


def target_addr(target: object) -> str | None:
    """The address a call goes to, as far as known before connecting."""
    if isinstance(target, ThreadConnection):
        return target.remote_addr
    return target if isinstance(target, str) else None


def _sleep_until_done(fut: ResponseFuture, until: float) -> None:
    """Sleep until ``fut`` completes or ``until`` passes (nothing to read for it here)."""
    waiter = thread_waiter()
    if fut._add_thread_waiter(waiter):
        try:
            while not fut._done:
                remaining = until - monotonic()
                if remaining <= 0:
                    break
                waiter.sleep(remaining)
        finally:
            fut._remove_thread_waiter(waiter)
            waiter.reset()

