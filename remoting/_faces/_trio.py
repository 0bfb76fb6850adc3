"""The trio-native faces: `TrioRemotingClient`, `TrioRemotingServer`, `open_client/server`."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .._config import ClientConfig, ServerConfig
from .._core._connection import Connection
from .._core._endpoint import Endpoint
from .._core._invoke import target_addr
from .._core._listen import Admission, bind_listeners, trio_listeners
from .._log import log
from .._security._tls import server_context, tls_server_stream

if TYPE_CHECKING:
    import socket
    from collections.abc import AsyncIterator, Callable, Iterable, Sequence
    from concurrent.futures import Executor

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestProcessor

    from .._core._channel import ChannelHandle
    from .._core._events import ChannelEventListener
    from .._core._future import ResponseFuture
    from .._errors import RemotingError
    from .._hooks import RPCHook
    from .._observability._statistics import EndpointStatistics

__all__ = ["TrioRemotingClient", "TrioRemotingServer", "open_client", "open_server"]

DEFAULT_TIMEOUT = 3.0  # RocketMQ's usual timeoutMillis
Target = str | Connection | None


class _Base:
    """What clients and servers share: processors, hooks, listeners, statistics."""

    endpoint: Endpoint

    def register_processor(
        self, code: int, processor: RequestProcessor | AsyncRequestProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve requests with ``code`` using ``processor``.

        Sync processors run on ``executor`` if given, else on a pool of their own
        (``threads`` threads, default ``config.default_processor_threads``); async processors
        run on the event loop.
        """
        self.endpoint.register_processor(code, processor, executor, threads)

    def register_default_processor(
        self, processor: RequestProcessor | AsyncRequestProcessor,
        executor: Executor | None = None, *, threads: int | None = None,
    ) -> None:
        """Serve every code that has no processor of its own."""
        self.endpoint.register_processor(None, processor, executor, threads)

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every call (client: sends; server: processing)."""
        self.endpoint.register_rpc_hook(hook)

    def register_channel_event_listener(self, listener: ChannelEventListener) -> None:
        """Receive connect/close/exception/idle events, in order, off the event loop."""
        self.endpoint.register_channel_event_listener(listener)

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return self.endpoint.statistics()


def run_before_hooks(endpoint: Endpoint, addr: str | None, request: RemotingCommand) -> None:
    """Run the client-side before-hooks in registration order."""
    for hook in endpoint.hooks:
        hook.do_before_request(addr or "", request)


def run_after_hooks(endpoint: Endpoint, addr: str | None, request: RemotingCommand,
                    response: RemotingCommand) -> None:
    """Run the client-side after-hooks (successful responses only)."""
    for hook in endpoint.hooks:
        hook.do_after_response(addr or "", request, response)


def with_after_hooks(
    ep: Endpoint, request: RemotingCommand,
    callback: Callable[[ResponseFuture], object] | None,
) -> Callable[[ResponseFuture], object]:
    """Wrap an async callback so the after-hooks run first (on the callback executor)."""
    def run(fut: ResponseFuture) -> None:
        if fut.response_command is not None:
            run_after_hooks(ep, fut.addr, request, fut.response_command)
        if callback is not None:
            callback(fut)

    return run


class _Invoker(_Base):
    """invoke_sync / invoke_async / invoke_oneway on a target (address, channel or None)."""

    async def _invoke_sync(self, target: Target, request: RemotingCommand, timeout: float,
                           retry_busy: bool) -> RemotingCommand:
        ep = self.endpoint
        addr = target_addr(target)
        if ep.hooks:
            run_before_hooks(ep, addr, request)
        response = await ep.invoke(target, request, timeout, retry_busy)
        if ep.hooks:
            run_after_hooks(ep, addr, request, response)
        return response

    async def _invoke_async(self, target: Target, request: RemotingCommand, timeout: float,
                            callback: Callable[[ResponseFuture], object] | None
                            ) -> ResponseFuture:
        ep = self.endpoint
        if ep.hooks:
            run_before_hooks(ep, target_addr(target), request)
            callback = with_after_hooks(ep, request, callback)
        return await ep.start_invoke(target, request, timeout, callback)

    async def _invoke_oneway(self, target: Target, request: RemotingCommand,
                             timeout: float) -> None:
        ep = self.endpoint
        if ep.hooks:
            run_before_hooks(ep, target_addr(target), request)
        await ep.invoke_oneway(target, request, timeout)


class TrioRemotingClient(_Invoker):
    """A client for trio code: the same calls as `RemotingClient`, awaited."""

    __module__ = "remoting"

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self.endpoint = Endpoint(self.config, "client")

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the client's core until cancelled (use with ``nursery.start``)."""
        await self.endpoint.run(task_status=task_status)

    def update_name_server_address_list(self, addrs: list[str]) -> None:
        """Set the addresses used by calls with ``addr=None`` (round-robin, failover)."""
        self.endpoint.update_name_server_address_list(addrs)

    def get_name_server_address_list(self) -> list[str]:
        """Return the address list."""
        return list(self.endpoint.name_servers)

    async def invoke_sync(self, addr: str | None, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT, *, retry_busy: bool = False
                          ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        Args:
            addr: ``"host:port"``, or None for the address list (with failover).
            request: the command; its opaque is replaced if already in flight.
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
        Cancelling the call removes its entry; the response, if any, is dropped.
        """
        return await self._invoke_sync(addr, request, timeout, retry_busy)

    async def invoke_async(self, addr: str | None, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Send ``request``; return its future. ``callback(future)`` runs once, off the loop.

        Failures (connect, permit, send, timeout) end up in the future, never raised here.
        """
        return await self._invoke_async(addr, request, timeout, callback)

    async def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send ``request`` without waiting for an answer; returns once it is queued.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingTooManyRequestsError,
            RemotingSendRequestError: as for `invoke_sync`, before the frame is queued.
        """
        await self._invoke_oneway(addr, request, timeout)

    async def invoke_many(self, addr: str | None, requests: Sequence[RemotingCommand],
                          timeout: float = DEFAULT_TIMEOUT, limit: int = 64
                          ) -> list[RemotingCommand | RemotingError]:
        """Send all ``requests`` with at most ``limit`` in flight; each has its own ``timeout``.

        Returns one entry per request, in order: its response, or the `RemotingError` that
        ended it. Hooks are not run for batch calls.
        """
        return await self.endpoint.invoke_many(addr, requests, timeout, limit)


class TrioRemotingServer(_Invoker):
    """A server for trio code; ``await nursery.start(server.serve)`` returns the port."""

    __module__ = "remoting"

    def __init__(self, config: ServerConfig | None = None) -> None:
        self.config = config or ServerConfig()
        self.endpoint = Endpoint(self.config, "server")
        self.port: int | None = None
        self._listeners: list[trio.SocketListener] = []
        self._bound: list[socket.socket] = []
        self._tls_context = server_context(self.config)
        self._admission = Admission(self.config.max_connections,
                                    self.config.max_connections_per_ip)
        self._scope: trio.CancelScope | None = None
        self._accept_scope: trio.CancelScope | None = None

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled or `shutdown`; ``task_status.started(port)``."""
        cfg = self.config
        self.bind()
        self._listeners = trio_listeners(self._bound)
        try:
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.endpoint.run)
                    assert self.endpoint._nursery is not None
                    nursery.start_soon(self._accept)
                    log.info("server.started", port=self.port, bind=cfg.bind_address)
                    task_status.started(self.port)
        finally:
            with trio.CancelScope(shield=True):
                await self._close_listeners()
            log.info("server.stopped", port=self.port)

    def bind(self) -> int:
        """Bind the listening socket now (sync, idempotent); return the port.

        `serve` binds if this was not called; calling it first reports a bad address in the
        caller's frame, before any task starts.

        Raises:
            RemotingStartError: the port is taken or invalid, or the address does not resolve.
        """
        if not self._bound:
            self._bound = bind_listeners(self.config)
            self.port = self._bound[0].getsockname()[1]
        assert self.port is not None
        return self.port

    async def _accept(self) -> None:
        with trio.CancelScope() as self._accept_scope:
            await trio.serve_listeners(self._handle, self._listeners,
                                       handler_nursery=self.endpoint._nursery)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            await stream.aclose()
            return
        cfg = self.config
        refusal = self._admission.admit(host)
        try:
            if refusal is not None:
                log.warning("connection.refused", peer=f"{host}:{port}", reason=refusal)
                await stream.aclose()
                return
            served: trio.abc.Stream | None = stream
            if self._tls_context is not None:
                served = None
                with trio.move_on_after(cfg.tls_handshake_timeout):
                    served = await tls_server_stream(stream, self._tls_context, cfg.tls_mode)
            if served is None:
                log.warning("connection.refused", peer=f"{host}:{port}",
                            reason=f"TLS handshake failed (tls_mode={cfg.tls_mode})")
                await stream.aclose()
                return
            conn = Connection(self.endpoint, served, f"{host}:{port}")
            self.endpoint.connection_opened(conn)
            await conn.run()
        finally:
            self._admission.release(host)

    async def _close_listeners(self) -> None:
        for listener in self._listeners:
            await listener.aclose()

    async def shutdown(self, grace: float | None = None) -> None:
        """Stop gracefully: stop accepting, answer GO_AWAY to new requests, let running
        processors finish for up to ``grace`` seconds (``config.shutdown_grace_seconds``),
        then close every connection and fail what is still pending. Idempotent."""
        if self._scope is None or self._scope.cancel_called:
            return
        if self._accept_scope is not None:
            self._accept_scope.cancel()
        await self._close_listeners()
        self.endpoint.begin_shutdown()
        grace = self.config.shutdown_grace_seconds if grace is None else grace
        finished = await self.endpoint.wait_processing_done(grace)
        if not finished:
            log.warning("server.shutdown_forced", still_processing=self.endpoint.processing)
        self._scope.cancel()

    def channels(self) -> list[ChannelHandle]:
        """Return the live connections (any thread: the blocking server calls it from its
        caller's)."""
        # list() copies the set in one step; iterating it directly raced the loop's changes
        return [c.channel for c in list(self.endpoint.connections) if not c.closed]

    async def invoke_sync(self, channel: ChannelHandle, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Call a connected client (which registered a processor) and wait."""
        return await self._invoke_sync(channel._conn, request, timeout, False)

    async def invoke_async(self, channel: ChannelHandle, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Call a connected client; return the future."""
        return await self._invoke_async(channel._conn, request, timeout, callback)

    async def invoke_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a oneway request to a connected client."""
        await self._invoke_oneway(channel._conn, request, timeout)

    def broadcast_oneway(self, channels: Iterable[ChannelHandle], request: RemotingCommand
                         ) -> int:
        """Send one oneway ``request`` to every channel (encoded once); return how many got it.

        A channel whose peer is not draining (over the high water mark) is skipped.
        """
        return self.endpoint.broadcast_oneway((c._conn for c in channels), request)


@asynccontextmanager
async def open_server(config: ServerConfig | None = None) -> AsyncIterator[TrioRemotingServer]:
    """Start a server for the duration of the block; ``server.port`` is set on entry."""
    server = TrioRemotingServer(config)
    server.bind()  # a bad address raises RemotingStartError here, not inside the nursery
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_client(config: ClientConfig | None = None) -> AsyncIterator[TrioRemotingClient]:
    """Run a client for the duration of the block."""
    client = TrioRemotingClient(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(client.serve)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()

