"""`Endpoint`: the trio core of a client or a server (RocketMQ's ``NettyRemotingAbstract``).

It owns its parts and wires them together; each part talks to the others through the
endpoint's wiring, never through the endpoint as a whole:

- `Invoker`: the calling side (permits, response table, deadlines, calls from threads);
- `Caller`: the ways to call, for every face, with RPC hooks and interceptors;
- `Dispatcher`: the receiving side (processors, their pools, replies);
- `ChannelTable`: a client's connections by address;
- `Inbox`, `CallbackRunner` (`_threads`): the hand-offs with other threads;
- `EventDispatcher`: channel events for listeners, on a thread of its own;
- `Streams`: the credit-based streams it sends and receives, and their control frames;
- `Counters`: what `statistics()` reports.

It is the owner of its connections (`ConnectionOwner`): requests go to the dispatcher,
responses to the invoker, and a closed connection fails its calls. Everything runs on the loop
thread that runs `run`; see `_threads` for the one way in from other threads. A thread-driven
`RemotingClient` adds its calling side (``threads``, a `ThreadDriver`), which drives its own
connections from the calling threads; the endpoint then runs only the receiving side, on a
loop started when the server first sends a request, and reports both in its statistics.
"""

from __future__ import annotations

import threading
from time import monotonic
from typing import TYPE_CHECKING, Any, Literal, Protocol

import trio

from codec import FLAG_ONEWAY, encode_frame_parts
from processors import RequestContext

from .._config import ClientConfig
from .._errors import RemotingError, translate
from .._log import log
from .._messaging._codes import STREAM_CODES
from .._observability._statistics import Counters, EndpointStatistics, ReceivingStatistics
from .._security._tls import client_context, peer_certificate_subject, tls_client_stream
from ._calling._caller import Caller
from ._doors._threads import CallbackRunner, Inbox, in_own_thread
from ._events import EventDispatcher
from ._receiving._channel_handle import ChannelHandle
from ._receiving._dispatch import Dispatcher
from ._receiving._first_step import check_first_step, in_async_processor, mark_reader_task
from ._receiving._pools import THREAD_JOIN_SECONDS
from ._streams._streams import Streams
from ._trio_driver._channels import ChannelTable
from ._trio_driver._connection import Connection
from ._trio_driver._invoker import Invoker
from ._trio_driver._sender import Bundle
from ._trio_driver._transport import transport_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence

    from codec import RemotingCommand

    from .._config import ServerConfig

__all__ = ["Endpoint", "LiveConnection", "ThreadSide"]


class LiveConnection(Protocol):
    """What an endpoint's statistics read of a live connection of either driver."""

    @property
    def queued_bytes(self) -> int: ...


class ThreadSide(Protocol):
    """What an endpoint reports of a thread-driven client's calling side."""

    def in_flight(self) -> int: ...

    def live_connections(self) -> Sequence[LiveConnection]: ...

    def unfolded_bytes(self) -> tuple[int, int]:
        """Bytes read and written on its live connections (folded into the counters when
        each closes)."""
        ...


class Endpoint:
    """The trio core of a client or a server."""

    def __init__(self, config: ClientConfig | ServerConfig,
                 role: Literal["client", "server"]) -> None:
        self.config = config
        self.role = role
        self.counters = Counters()
        self.inbox = Inbox()
        self.callbacks = CallbackRunner(f"remoting-{role}-callback", config.callback_threads(),
                                        self)
        self.events = EventDispatcher(f"remoting-{role}-events")
        if isinstance(config, ClientConfig):
            self.channels = ChannelTable(role, config.connect_timeout, self._dial)
            self.invoker = Invoker(
                role, config, self.channels, self.counters, self.callbacks, self.inbox,
                permits=(config.client_async_semaphore_value,
                         config.client_oneway_semaphore_value),
                go_away_retry=config.enable_reconnect_for_go_away,
                close_on_sync_timeout=config.close_socket_if_timeout)
        else:  # a server calls back over its connections only: it never dials
            self.channels = ChannelTable(role, 3.0, self._dial)
            self.invoker = Invoker(
                role, config, self.channels, self.counters, self.callbacks, self.inbox,
                permits=(config.server_async_semaphore_value,
                         config.server_oneway_semaphore_value),
                go_away_retry=False, close_on_sync_timeout=False)
        self.streams = Streams(config.max_frame_bytes)
        self.dispatcher = Dispatcher(role, config, self.counters, self.inbox, self,
                                     self.streams.opener)
        for code in STREAM_CODES:
            self.dispatcher.register_handler(code, self.streams.handle)  # type: ignore[arg-type]
        self.caller = Caller(self.invoker.threads, self.invoker, self.dispatcher.hooks,
                             run_hooks=role == "client", role=role, direct_trio=self.invoker)
        # the ConnectionOwner protocol, wired straight to the parts (one call per command)
        self.request_received = self.dispatcher.request_received
        self.response_received = self.invoker.response_received
        self.read_done = self.dispatcher.read_done
        # a reader task runs async processors' first steps (the receiving side's policy)
        self.reader_started = mark_reader_task
        self.connections: set[Connection] = set()
        # parts that keep state per connection outside the endpoint (an event bus,
        # `HeldRequests`): told on the loop thread, in order, before the channel listeners, of
        # each connection that closed; replaced, never mutated (the loop may be iterating it)
        self.close_watchers: list[Callable[[ChannelHandle], object]] = []
        self.loop_thread_id: int | None = None
        self.running = False
        self.closed = False
        self.telemetry_installed = False
        self._nursery: trio.Nursery | None = None
        self._background: list[Callable[[], Awaitable[object]]] = []  # started by `run`
        self._tls = client_context(config) if isinstance(config, ClientConfig) else None
        self._unverified_warned: set[str] = set()  # addresses told tls.verification_skipped
        self._max_processing = getattr(config, "max_requests_per_connection", 0)
        # a thread-driven client's calling side, when it has one (`_faces._blocking`)
        self.threads: ThreadSide | None = None

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the core until cancelled; on exit every pending call has failed."""
        self.inbox.open(trio.lowlevel.current_trio_token())
        self.loop_thread_id = self.callbacks.loop_thread_id = threading.get_ident()
        try:
            await check_first_step()  # once per process: async processors' shortcut, or not
            async with trio.open_nursery() as nursery:
                self._nursery = self.streams.outgoing.nursery = nursery
                await nursery.start(self.invoker.run)
                for fn in self._background:
                    nursery.start_soon(fn)
                self.channels.open(nursery)
                if self.config.max_idle_seconds > 0:
                    nursery.start_soon(self._close_idle_connections)
                self.running = True
                task_status.started()
                await trio.sleep_forever()
        finally:
            self.running = False
            self.closed = True
            self._nursery = self.streams.outgoing.nursery = None
            self.channels.close()
            self.invoker.close()
            self.invoker.fail_all(f"{self.role} shut down")
            self.dispatcher.stop_pools()
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._join_threads)

    def _join_threads(self) -> None:
        left = self.dispatcher.join_pools(monotonic() + THREAD_JOIN_SECONDS)
        if left:
            log.warning("pool.threads_left_running", threads=left, seconds=THREAD_JOIN_SECONDS,
                        reason="processors still running at shutdown (daemon threads)")
        self.events.close()
        self.callbacks.close()

    @property
    def nursery(self) -> trio.Nursery:
        """The nursery of the running endpoint, where its connections run.

        Raises:
            RuntimeError: the endpoint is not running.
        """
        if self._nursery is None:
            raise RuntimeError(f"the {self.role} is not running")
        return self._nursery

    def run_in_background(self, fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``fn()`` as a task of this endpoint while it runs (cancelled when it stops):
        at once if it runs (call it on the loop thread then), else once `run` starts."""
        if self._nursery is not None:
            self._nursery.start_soon(fn)
        else:
            self._background.append(fn)

    def in_own_thread(self) -> bool:
        """True in a thread of this endpoint's pools or callback executor (threads its
        shutdown joins, so a shutdown called there must not wait for them)."""
        return in_own_thread(self)

    def call_on_loop(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the loop thread: now if called there, else through the inbox (any
        thread). Returns False, without running it, once the loop has ended."""
        if threading.get_ident() == self.loop_thread_id:
            fn()
            return True
        try:
            self.inbox.post(_call, fn)
        except RuntimeError:  # trio.RunFinishedError, or not started
            return False
        return True

    def after_read(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the loop thread once the read of requests it is handling ends
        (`Dispatcher.after_read`: what the rest of the read does comes first); outside such
        a read, or from another thread, soon, through the inbox (`call_soon`). Returns
        False, without running it, once the loop has ended."""
        if threading.get_ident() == self.loop_thread_id and self.dispatcher.after_read(fn):
            return True
        return self.call_soon(fn)

    def call_soon(self, fn: Callable[[], object]) -> bool:
        """Run ``fn()`` on the loop thread through the inbox, even when called there (then
        once the running task lets the loop go on: what that task does meanwhile comes
        first). Returns False, without running it, once the loop has ended."""
        try:
            self.inbox.post(_call, fn)
        except RuntimeError:  # trio.RunFinishedError, or not started
            return False
        return True

    def begin_shutdown(self) -> None:
        """Answer GO_AWAY to new requests from here on, and end the streams this endpoint
        sends with GO_AWAY (graceful shutdown)."""
        self.dispatcher.shutting_down = True
        self.streams.go_away()

    async def wait_processing_done(self, grace: float) -> bool:
        """Wait up to ``grace`` seconds for running processors and for their responses to
        reach the sockets; True if all finished. An async processor calling this does not
        wait for itself."""
        with trio.move_on_after(grace):
            await self.dispatcher.wait_idle(1 if in_async_processor() else 0)
            for conn in list(self.connections):
                await conn.wait_flushed()
            return True
        return False

    # ------------------------------------------------------------------ connections

    def adopt(self, stream: trio.abc.Stream, remote_addr: str,
              addr_key: str | None = None) -> Connection:
        """Make a `Connection` of ``stream`` owned by this endpoint; the caller runs it."""
        conn = Connection(transport_for(stream), remote_addr, self, self.config, self.counters,
                          role=self.role, addr_key=addr_key,
                          max_processing=self._max_processing, call_on_loop=self.call_on_loop)
        conn.channel = channel = ChannelHandle(conn, self)
        conn.ctx = RequestContext(remote_addr=remote_addr, channel=channel,
                                  peer_certificate_subject=peer_certificate_subject(stream))
        self.connections.add(conn)
        self.counters.connections_opened += 1
        log.info("connection.opened", conn_id=conn.id, peer=remote_addr, role=self.role)
        self.events.emit("connect", remote_addr, channel)
        return conn

    async def _dial(self, addr: str, host: str, port: int) -> Connection:
        """Connect to ``addr`` (TLS if configured) and start serving the connection."""
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        if self._tls is not None:
            assert isinstance(self.config, ClientConfig)
            if not self.config.tls_verify and addr not in self._unverified_warned:
                self._unverified_warned.add(addr)
                log.warning("tls.verification_skipped", peer=addr,
                            reason="tls_verify=False: any certificate is accepted")
            stream = await tls_client_stream(stream, self._tls, host,  # type: ignore[arg-type]
                                             self.config)
        nursery = self._nursery
        if nursery is None:  # shut down while connecting
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise RemotingError(f"the {self.role} is shut down", addr)
        conn = self.adopt(stream, addr, addr_key=addr)
        nursery.start_soon(conn.run)
        return conn

    def connection_closed(self, conn: Connection) -> None:
        """Forget ``conn`` and fail its pending calls at once (RocketMQ failFast)."""
        self.connections.discard(conn)
        self.counters.bytes_written += conn.sender.take_bytes_sent_by_threads()
        self.channels.forget(conn)
        self.invoker.connection_lost(conn)
        self.streams.connection_lost(conn)
        channel = conn.channel
        assert isinstance(channel, ChannelHandle)  # adopt() made it
        for watch in self.close_watchers:
            try:
                watch(channel)
            except Exception:  # a bug of the watcher's: the others must still hear of it
                log.error("callback.failed", conn_id=conn.id, exc_info=True)
        if conn.broken:
            self.events.emit("exception", conn.remote_addr, conn.channel)
        self.events.emit("close", conn.remote_addr, conn.channel)

    async def _close_idle_connections(self) -> None:
        idle = self.config.max_idle_seconds
        while True:
            await trio.sleep(max(0.01, idle / 10))
            limit = trio.current_time() - idle
            # a connection whose requests are still being processed is busy, not idle
            for conn in [c for c in self.connections
                         if c.last_activity <= limit and not c.processing]:
                log.info("connection.idle", conn_id=conn.id, peer=conn.remote_addr,
                         idle_seconds=idle)
                self.events.emit("idle", conn.remote_addr, conn.channel)
                conn.close(f"idle for {idle}s")

    def broadcast_oneway(self, conns: Iterable[Connection], request: RemotingCommand) -> int:
        """Queue one oneway ``request`` on each live connection; return how many got it.

        The frame is encoded once, from a copy with the oneway bit set (``request`` is not
        changed). Connections over their high water mark are skipped (a slow consumer cannot
        stall the others) and logged.

        Raises:
            RemotingCommandError: ``request`` cannot be encoded; nothing was sent.
        """
        try:
            oneway = request.with_opaque(request.opaque)
            oneway.flag = request.flag | FLAG_ONEWAY
            frame = encode_frame_parts(oneway, self.invoker.max_frame,
                                       self.invoker.max_header)
        except Exception as exc:
            raise translate(exc, "encode", None) from exc
        sent = 0
        for conn in conns:
            if conn.closed:
                continue
            if conn.queued_bytes > conn.high_water:
                log.warning("broadcast.skipped", conn_id=conn.id, peer=conn.remote_addr,
                            queued_bytes=conn.queued_bytes)
                continue
            if conn.send(frame):
                sent += 1
        counts = self.counters.sent
        counts[request.code] = counts.get(request.code, 0) + sent
        return sent

    # ------------------------------------------------------------ calls bounded by their caller

    def notify(self, channel: ChannelHandle, request: RemotingCommand, timeout: float,
               on_done: Callable[[RemotingCommand | None, BaseException | None], object]
               ) -> None:
        """Send ``request`` over ``channel`` with no in-flight permit, and call
        ``on_done(response, cause)`` on the loop once it ends (`Invoker.notify`). Loop only:
        for a part that bounds its own calls (the event bus's pushes), not for users."""
        self.invoker.notify(channel._conn, request, timeout, on_done)

    def notify_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                      timeout: float) -> None:
        """Queue a oneway ``request`` over ``channel`` with no permit (loop only).

        Raises:
            RemotingError: not sent (a closed connection, an unencodable request).
        """
        self.invoker.send_oneway(channel._conn, request, None, timeout)

    @staticmethod
    def bundled(channel: ChannelHandle) -> Bundle:
        """Within it, frames for ``channel``'s peer are only queued (sent early every
        `BUNDLE_FRAMES`); on leaving, the writer task is woken to send them once the running
        task lets it run, together with what else is queued for that peer by then (the rest
        of a read being handled, say): one write for all (loop only)."""
        return Bundle(channel._conn.sender)

    @staticmethod
    def has_room(channel: ChannelHandle) -> bool:
        """True while ``channel``'s queue of bytes to send is under its high water mark."""
        conn = channel._conn
        return conn.queued_bytes <= conn.high_water

    @staticmethod
    async def wait_room(channel: ChannelHandle) -> None:
        """Wait until ``channel``'s queue is under its high water mark, or it closed."""
        await channel._conn.wait_writable()

    # ------------------------------------------------------------------ statistics

    def receiving_statistics(self) -> ReceivingStatistics:
        """What the receiving side counted (on the loop thread, or once it has stopped)."""
        c = self.counters
        return ReceivingStatistics(
            requests_received=dict(c.received), error_replies=dict(c.error_replies),
            processor_queue=self.dispatcher.queue_depths(),
            processing=self.dispatcher.processing, requests_dropped=c.requests_dropped)

    def in_flight(self) -> int:
        """Calls sent and waiting for their response (either driver's)."""
        threads = self.threads
        return len(self.invoker.table) + (0 if threads is None else threads.in_flight())

    def live_connections(self) -> list[LiveConnection]:
        """The connections open now (either driver's)."""
        conns: list[LiveConnection] = list(self.connections)
        if self.threads is not None:
            conns += self.threads.live_connections()
        return conns

    def unfolded_bytes_written(self) -> int:
        """Bytes written on live connections that ``counters`` does not hold yet (threads'
        sends, folded in when their connection closes)."""
        written = sum(conn.sender.bytes_sent_by_threads for conn in list(self.connections))
        if self.threads is not None:
            written += self.threads.unfolded_bytes()[1]
        return written

    def unfolded_bytes_read(self) -> int:
        """Bytes read on live connections of the thread driver, not in ``counters`` yet."""
        return 0 if self.threads is None else self.threads.unfolded_bytes()[0]

    def statistics(self) -> EndpointStatistics:
        """Return a snapshot of the counters (on the loop thread, or once it has stopped)."""
        c = self.counters
        invoker = self.invoker
        return EndpointStatistics(
            connections=len(self.connections),
            connecting=self.channels.connecting,
            connections_opened=c.connections_opened,
            in_flight=len(invoker.table),
            requests_sent=dict(c.sent),
            requests_received=dict(c.received),
            error_replies=dict(c.error_replies),
            timeouts=c.timeouts,
            orphaned_responses=c.orphans,
            processor_queue=self.dispatcher.queue_depths(),
            processing=self.dispatcher.processing,
            latency=c.latency_summary(),
            dropped_events=self.events.dropped,
            async_permits_free=invoker.async_permits.free,
            oneway_permits_free=invoker.oneway_permits.free,
            queued_bytes=sum(conn.queued_bytes for conn in self.connections),
            writes=c.writes,
            frames_written=c.frames_written,
            sent_by_threads=c.sent_by_threads,
            bytes_read=c.bytes_read,
            bytes_written=c.bytes_written + sum(
                conn.sender.bytes_sent_by_threads for conn in self.connections),
            go_away_received=c.go_away,
            requests_dropped=c.requests_dropped,
        )


def _call(fn: Callable[[], object]) -> None:
    fn()
