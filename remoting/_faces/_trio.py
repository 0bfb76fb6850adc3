"""The trio-native faces: `TrioRemotingClient`, `TrioRemotingServer`, `open_client/server`.

Thin: each call goes to the endpoint's `Caller` (hooks, interceptors, the invoker); processors,
hooks, interceptors and listeners are registered with its `Dispatcher`, `Caller` and
`EventDispatcher`. Everything here runs on the caller's trio loop, the endpoint's own.
"""

from __future__ import annotations

import dataclasses
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from codec import FLAG_RESPONSE

from .._checks import config_of, grace_seconds, the_request
from .._config import ClientConfig, ServerConfig
from .._core._acceptor import Acceptor
from .._core._endpoint import Endpoint
from .._core._listen import bind_listeners, trio_listeners
from .._core._receiving._channel_handle import channel_of, channels_of
from .._errors import RemotingError
from .._interceptors import ClientInterceptor, ServerInterceptor
from .._log import log
from .._observability._otel_setup import install_telemetry
from ._one_error import raise_one
from ._streams import TrioStream, open_trio_stream

if TYPE_CHECKING:
    import socket
    from collections.abc import AsyncIterator, Callable, Iterable, Sequence
    from concurrent.futures import Executor

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestProcessor, StreamProcessor

    from .._core._calling._future import ResponseFuture
    from .._core._events import ChannelEventListener
    from .._core._receiving._channel_handle import ChannelHandle
    from .._hooks import RPCHook
    from .._observability._statistics import EndpointStatistics

__all__ = ["DEFAULT_TIMEOUT", "TrioRemotingClient", "TrioRemotingServer", "open_client",
           "open_server"]

DEFAULT_TIMEOUT = 3.0  # RocketMQ's usual timeoutMillis


class _Face:
    """What clients and servers share: processors, hooks, listeners, statistics."""

    endpoint: Endpoint

    def register_processor(
        self, code: int, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve requests with ``code`` using ``processor``.

        Sync processors run on ``executor`` if given, else on a pool of their own
        (``threads`` threads, default ``config.default_processor_threads``); async and stream
        processors run on the event loop.
        """
        self.endpoint.dispatcher.register(code, processor, executor, threads)

    def register_default_processor(
        self, processor: RequestProcessor | AsyncRequestProcessor | StreamProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve every code that has no processor of its own."""
        self.endpoint.dispatcher.register(None, processor, executor, threads)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every call (client: sends; server: processing).

        Raises:
            TypeError: ``hook`` lacks ``do_before_request`` or ``do_after_response``.
        """
        self.endpoint.dispatcher.register_hook(hook)

    def register_interceptor(self, interceptor: ClientInterceptor | ServerInterceptor) -> None:
        """Run ``interceptor`` around every call it is made for (see `ClientInterceptor`,
        `ServerInterceptor`; an object may be both), inside those registered before.

        Raises:
            TypeError: ``interceptor`` is neither.
        """
        register_interceptor(self.endpoint, interceptor)

    def register_channel_event_listener(self, listener: ChannelEventListener) -> None:
        """Receive connect/close/exception/idle events, in order, off the event loop."""
        self.endpoint.events.add(listener)

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return self.endpoint.statistics()


def register_interceptor(endpoint: Endpoint,
                         interceptor: ClientInterceptor | ServerInterceptor) -> None:
    """Register ``interceptor`` on the sides of ``endpoint`` it is made for."""
    if not isinstance(interceptor, ClientInterceptor | ServerInterceptor):
        raise TypeError("an interceptor must subclass remoting.ClientInterceptor or "
                        f"remoting.ServerInterceptor, not {type(interceptor).__name__}")
    if isinstance(interceptor, ClientInterceptor):
        endpoint.caller.add(interceptor)
    if isinstance(interceptor, ServerInterceptor):
        endpoint.dispatcher.register_interceptor(interceptor)


class TrioRemotingClient(_Face):
    """A client for trio code: the same calls as `RemotingClient`, awaited."""

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config_of(config, ClientConfig)
        self.endpoint = Endpoint(self.config, "client")
        self._caller = self.endpoint.caller

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the client's core until cancelled (use with ``nursery.start``)."""
        install_telemetry(self.endpoint)  # the SDK is configured by now, if the app uses one
        try:
            await self.endpoint.run(task_status=task_status)
        except BaseExceptionGroup as group:
            raise_one(group)

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Set the addresses used by calls with ``addr=None`` (round-robin, failover).

        Raises:
            TypeError: ``addrs`` is a single string, not a list of them.
        """
        if isinstance(addrs, str | bytes):
            raise TypeError(f"addrs must be a list of 'host:port' strings, got {addrs!r}")
        self.endpoint.channels.set_addresses(addrs)

    def get_name_server_address_list(self) -> list[str]:
        """Return the address list."""
        return list(self.endpoint.channels.addresses)

    @property
    def current_name_server(self) -> str | None:
        """The address from the list that ``addr=None`` calls use now (None: not chosen yet)."""
        return self.endpoint.channels.current

    async def invoke_sync(self, addr: str | None, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT, *, retry_busy: bool = False
                          ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        Args:
            addr: ``"host:port"``, or None for the address list (with failover).
            request: the command, never changed (in flight already, a copy with an opaque
                of its own goes out).
            timeout: seconds for the whole call, connect included.
            retry_busy: resend after SYSTEM_BUSY replies, with backoff, within the timeout
                (only for requests that are safe to repeat).

        Returns the response whatever its code (a non-SUCCESS code is data).

        Raises:
            RemotingConnectError: no connection could be made; nothing was sent.
            RemotingTimeoutError: no response in ``timeout`` seconds. With
                ``close_socket_if_timeout`` the connection is closed (as RocketMQ).
            RemotingSendRequestError: the write failed or the connection broke.
            RemotingTooManyRequestsError: no permit, or the peer does not drain its socket.
            RemotingCommandError: the request cannot be encoded.
            TypeError, ValueError: ``request`` is not a `RemotingCommand`, or ``timeout`` is
                not a number of seconds >= 0 (NaN, -1); nothing was sent.
        Cancelling the call removes its entry; the response, if any, is dropped.
        """
        return await self._caller.ainvoke_sync(addr, addr, request, timeout, retry_busy)

    async def invoke_async(self, addr: str | None, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Send ``request``; return its future. ``callback(future)`` runs once, off the loop.

        Failures (connect, permit, send, timeout) end up in the future, never raised here.
        """
        return await self._caller.ainvoke_async(addr, addr, request, timeout, callback)

    async def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send ``request`` without waiting for an answer; returns once it is queued.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingTooManyRequestsError,
            RemotingSendRequestError: as for `invoke_sync`, before the frame is queued.
        """
        await self._caller.ainvoke_oneway(addr, addr, request, timeout)

    async def invoke_many(self, addr: str | None, requests: Sequence[RemotingCommand],
                          timeout: float = DEFAULT_TIMEOUT, limit: int = 64
                          ) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` with at most ``limit`` in flight; each has its own ``timeout``.

        Returns one entry per request, in order: its response, or the `RemotingError` that
        ended it. Interceptors run once per batch; RPC hooks as for one call, on each request:
        every before-hook on every request before any is sent (one that raises fails the whole
        call, as in `invoke_sync`, and nothing is sent), the after-hooks on each response.
        """
        return await self._caller.ainvoke_many(addr, addr, requests, timeout, limit)

    @asynccontextmanager
    async def open_stream(self, addr: str | None, request: RemotingCommand, credits: int = 64,
                          timeout: float = DEFAULT_TIMEOUT, *, auto_credit: bool = True
                          ) -> AsyncIterator[TrioStream]:
        """Send ``request`` to a `processors.StreamProcessor` and receive its stream:
        ``async with client.open_stream(addr, request) as stream: async for item in stream``.

        Args:
            addr: ``"host:port"``, or None for the address list.
            request: the opening request (its code is the stream processor's); ``streamId``
                and ``credits`` are added to its ext fields.
            credits: how many items the server may send before it hears from us again (1 to
                65,536; Pulsar's receiver queue).
            timeout: seconds for the opening request's answer.
            auto_credit: give credits back as items are taken, in batches of half
                ``credits``; False: `TrioStream.grant` does (or the server's own protocol).

        Leaving the block before the stream's end cancels it on the server.

        Raises:
            RemotingStreamError: the server refused the stream (its code and remark); or,
                while iterating, the stream ended with an error or its connection was lost.
            RemotingConnectError, RemotingTimeoutError, RemotingSendRequestError,
            RemotingTooManyRequestsError, RemotingCommandError: as `invoke_sync`, for the
                opening request.
            TypeError, ValueError: ``credits`` is not 1 to 65,536, or ``request`` is not a
                request; nothing was sent.
        """
        stream = await open_trio_stream(self.endpoint, addr, request, credits, timeout,
                                        auto_credit)
        try:
            yield stream
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(DEFAULT_TIMEOUT):
                await stream.aclose()


class TrioRemotingServer(_Face):
    """A server for trio code; ``await nursery.start(server.serve)`` returns the port."""

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config_of(config, ServerConfig)
        self.endpoint = Endpoint(self.config, "server")
        self._port: int | None = None
        self._caller = self.endpoint.caller
        self._acceptor = Acceptor(self.endpoint, self.config)
        self._bound: list[socket.socket] = []
        self._listeners: list[trio.SocketListener] = []
        self._scope: trio.CancelScope | None = None
        self._accept_scope: trio.CancelScope | None = None

    @property
    def port(self) -> int:
        """The listening port, once bound (as `RemotingServer.port`).

        Raises:
            RemotingError: the server is not bound yet (`bind`, `serve` or `open_server`).
        """
        if self._port is None:
            raise RemotingError("TrioRemotingServer is not bound yet: call bind() or serve()")
        return self._port

    @property
    def addr(self) -> str:
        """``"bind_address:port"``, for clients on this machine (as `RemotingServer.addr`).

        Raises:
            RemotingError: the server is not bound yet (`bind`, `serve` or `open_server`).
        """
        return f"{self.config.bind_address}:{self.port}"

    def bind(self) -> int:
        """Bind the listening socket now (sync, idempotent); return the port.

        `serve` binds if this was not called; calling it first reports a bad address in the
        caller's frame, before any task starts.

        Raises:
            RemotingStartError: the port is taken or invalid, or the address does not resolve.
        """
        if not self._bound:
            self._bound = bind_listeners(self.config)
            self._port = self._bound[0].getsockname()[1]
        return self.port

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled or `shutdown`; ``task_status.started(port)``.

        Raises:
            RemotingStartError: the port cannot be bound (see `bind`).
        """
        self.bind()
        self._listeners = trio_listeners(self._bound)
        try:
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    install_telemetry(self.endpoint)
                    await nursery.start(self.endpoint.run)
                    nursery.start_soon(self._accept)
                    log.info("server.started", port=self.port, bind=self.config.bind_address)
                    task_status.started(self.port)
        except BaseExceptionGroup as group:
            raise_one(group)
        finally:
            with trio.CancelScope(shield=True):
                await self._close_listeners()
            log.info("server.stopped", port=self.port)

    async def _accept(self) -> None:
        # Connections live in the endpoint's nursery, so that stopping to accept (graceful
        # shutdown) leaves them serving what they carry.
        with trio.CancelScope() as self._accept_scope:
            await trio.serve_listeners(self._acceptor.handle, self._listeners,
                                       handler_nursery=self.endpoint.nursery)

    async def _close_listeners(self) -> None:
        for listener in self._listeners:
            await listener.aclose()

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return dataclasses.replace(self.endpoint.statistics(), admitted=self._acceptor.admitted)

    def drain(self) -> None:
        """Answer GO_AWAY to every new request from now on, while what is running finishes.

        Clients that understand GO_AWAY (ours; RocketMQ from 5.3.1) resend elsewhere, so
        traffic moves to other servers before this one stops. `shutdown` starts with this.
        """
        self.endpoint.begin_shutdown()

    @property
    def draining(self) -> bool:
        """True once `drain` (or `shutdown`) began."""
        return self.endpoint.dispatcher.shutting_down

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop gracefully: stop accepting, answer GO_AWAY to new requests, let running
        processors finish for up to ``grace`` seconds (``config.shutdown_grace_seconds``),
        then close every connection and fail what is still pending. Idempotent.

        Awaited in one of this server's async processors, it does not wait for that processor,
        whose response then goes out only if the socket takes it at once: to be sure of it,
        ``nursery.start_soon(server.shutdown)`` and return instead.

        Raises:
            TypeError, ValueError: ``grace`` is not a number of seconds >= 0.
        """
        grace = grace_seconds(grace)
        if self._scope is None or self._scope.cancel_called:
            return
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        await self._close_listeners()
        self.endpoint.begin_shutdown()
        grace = self.config.shutdown_grace_seconds if grace is None else grace
        if not await self.endpoint.wait_processing_done(grace):
            log.warning("server.shutdown_forced",
                        still_processing=self.endpoint.dispatcher.processing)
        self._scope.cancel()

    def channels(self) -> list[ChannelHandle]:
        """Return the live connections."""
        return [c.channel for c in self.endpoint.connections  # type: ignore[misc]
                if not c.closed]

    async def invoke_sync(self, channel: ChannelHandle, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Call a connected client (which registered a processor) and wait.

        A server's RPC hooks do not run for its calls back (as RocketMQ); interceptors do.
        """
        return await channel_of(channel).invoke_sync_async(request, timeout)

    async def invoke_async(self, channel: ChannelHandle, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Call a connected client; return the future."""
        return await channel_of(channel).invoke_async_async(request, timeout, callback)

    async def invoke_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a oneway request to a connected client."""
        await channel_of(channel).invoke_oneway_async(request, timeout)

    def broadcast_oneway(self, channels: Iterable[ChannelHandle], request: RemotingCommand
                         ) -> int:
        """Send one oneway ``request`` to every channel (encoded once); return how many got it.

        A channel whose peer is not draining (over the high water mark) is skipped; closed
        channels are too. ``request`` itself is not changed (a copy is marked oneway).

        Raises:
            RemotingCommandError: ``request`` cannot be encoded; nothing was sent.
            TypeError, ValueError: ``channels`` holds something other than channels, or
                ``request`` is not a `RemotingCommand` or is a response.
        """
        the_request(request, FLAG_RESPONSE)
        return self.endpoint.broadcast_oneway([c._conn for c in channels_of(channels)], request)


@asynccontextmanager
async def open_server(config: ServerConfig | None = None) -> AsyncIterator[TrioRemotingServer]:
    """Start a server for the duration of the block; ``server.port`` is set on entry.

    What the block raises leaves it as itself (never wrapped in an exception group).

    Raises:
        RemotingStartError: the port cannot be bound, before anything starts.
    """
    server = TrioRemotingServer(config)
    server.bind()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            try:
                yield server
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_one(group)


@asynccontextmanager
async def open_client(config: ClientConfig | None = None) -> AsyncIterator[TrioRemotingClient]:
    """Run a client for the duration of the block.

    What the block raises leaves it as itself (never wrapped in an exception group): an
    ``except RemotingConnectError`` around the block catches a call's failure in it.
    """
    client = TrioRemotingClient(config)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(client.serve)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_one(group)
