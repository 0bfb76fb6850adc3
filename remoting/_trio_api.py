"""The trio-native faces: `TrioRemotingClient`, `TrioRemotingServer`, `open_client/server`."""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ._config import ClientConfig, ServerConfig
from ._connection import Connection
from ._endpoint import Endpoint
from ._log import log

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from concurrent.futures import Executor

    from codec import RemotingCommand
    from processors import AsyncRequestProcessor, RequestProcessor

    from ._channel import ChannelHandle
    from ._errors import RemotingError
    from ._future import ResponseFuture
    from ._hooks import RPCHook
    from ._statistics import EndpointStatistics

__all__ = ["TrioRemotingClient", "TrioRemotingServer", "open_client", "open_server"]

DEFAULT_TIMEOUT = 3.0  # RocketMQ's usual timeoutMillis


class _Base:
    """What clients and servers share: processors, hooks, statistics."""

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

    def statistics(self) -> EndpointStatistics:
        """Return a frozen snapshot of the counters."""
        return self.endpoint.statistics()


def _before_hooks(endpoint: Endpoint, addr: str, request: RemotingCommand) -> None:
    for hook in endpoint.hooks:
        hook.do_before_request(addr, request)


def _after_hooks(endpoint: Endpoint, addr: str, request: RemotingCommand,
                 response: RemotingCommand) -> None:
    for hook in endpoint.hooks:
        hook.do_after_response(addr, request, response)


class _Invoker(_Base):
    """invoke_sync / invoke_async / invoke_oneway / invoke_many on a target (addr or channel)."""

    async def _invoke_sync(self, target: str | Connection, addr: str, request: RemotingCommand,
                           timeout: float) -> RemotingCommand:
        ep = self.endpoint
        if ep.hooks:
            _before_hooks(ep, addr, request)
        response = await ep.invoke(target, request, timeout)
        if ep.hooks:
            _after_hooks(ep, addr, request, response)
        return response

    async def _invoke_async(self, target: str | Connection, addr: str, request: RemotingCommand,
                            timeout: float, callback: Callable[[ResponseFuture], object] | None
                            ) -> ResponseFuture:
        ep = self.endpoint
        if ep.hooks:
            _before_hooks(ep, addr, request)
            callback = _with_after_hooks(ep, addr, request, callback)
        return await ep.start_invoke(target, request, timeout, callback)

    async def _invoke_oneway(self, target: str | Connection, addr: str,
                             request: RemotingCommand, timeout: float) -> None:
        ep = self.endpoint
        if ep.hooks:
            _before_hooks(ep, addr, request)
        await ep.invoke_oneway(target, request, timeout)


def _with_after_hooks(
    ep: Endpoint, addr: str, request: RemotingCommand,
    callback: Callable[[ResponseFuture], object] | None,
) -> Callable[[ResponseFuture], object]:
    def run(fut: ResponseFuture) -> None:
        if fut.response_command is not None:
            _after_hooks(ep, addr, request, fut.response_command)
        if callback is not None:
            callback(fut)

    return run


class TrioRemotingClient(_Invoker):
    """A client for trio code: the same calls as `RemotingClient`, awaited."""

    __module__ = "remoting"

    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self.endpoint = Endpoint(self.config, "client")

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run the client's core until cancelled (use with ``nursery.start``)."""
        try:
            await self.endpoint.run(task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self.endpoint.close_callback_executor)

    async def invoke_sync(self, addr: str, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        Returns the response whatever its code (a non-SUCCESS code is data).

        Raises:
            RemotingConnectError: no connection could be made; nothing was sent.
            RemotingTimeoutError: no response in ``timeout`` seconds (connect included).
            RemotingSendRequestError: the write failed or the connection broke.
            RemotingTooManyRequestsError: no in-flight permit within the timeout.
            RemotingCommandError: the request cannot be encoded.
        Cancelling the call removes its entry; the response, if any, is dropped.
        """
        return await self._invoke_sync(addr, addr, request, timeout)

    async def invoke_async(self, addr: str, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Send ``request``; return its future. ``callback(future)`` runs once, off the loop.

        Failures (connect, permit, send, timeout) end up in the future, never raised here.
        """
        return await self._invoke_async(addr, addr, request, timeout, callback)

    async def invoke_oneway(self, addr: str, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send ``request`` without waiting for an answer; returns once it is queued.

        Raises:
            RemotingConnectError, RemotingTimeoutError, RemotingTooManyRequestsError,
            RemotingSendRequestError: as for `invoke_sync`, before the frame is queued.
        """
        await self._invoke_oneway(addr, addr, request, timeout)

    async def invoke_many(self, addr: str, requests: Sequence[RemotingCommand],
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

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; ``task_status.started(port)``."""
        cfg = self.config
        listeners = await trio.open_tcp_listeners(
            cfg.listen_port, host=cfg.bind_address, backlog=cfg.backlog
        )
        self.port = listeners[0].socket.getsockname()[1]
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.endpoint.run)
                assert self.endpoint._nursery is not None
                nursery.start_soon(
                    partial(trio.serve_listeners, self._handle, listeners,
                            handler_nursery=self.endpoint._nursery)
                )
                log.info("server.started", port=self.port, bind=cfg.bind_address)
                task_status.started(self.port)
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await listener.aclose()
                await trio.to_thread.run_sync(self.endpoint.close_callback_executor)
            log.info("server.stopped", port=self.port)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            await stream.aclose()
            return
        conn = Connection(self.endpoint, stream, f"{host}:{port}")
        self.endpoint.connection_opened(conn)
        await conn.run()

    def channels(self) -> list[ChannelHandle]:
        """Return the live connections."""
        return [c.channel for c in self.endpoint.connections if not c.closed]

    async def invoke_sync(self, channel: ChannelHandle, request: RemotingCommand,
                          timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Call a connected client (which registered a processor) and wait."""
        conn = channel._conn
        return await self._invoke_sync(conn, conn.remote_addr, request, timeout)

    async def invoke_async(self, channel: ChannelHandle, request: RemotingCommand,
                           timeout: float = DEFAULT_TIMEOUT,
                           callback: Callable[[ResponseFuture], object] | None = None,
                           ) -> ResponseFuture:
        """Call a connected client; return the future."""
        conn = channel._conn
        return await self._invoke_async(conn, conn.remote_addr, request, timeout, callback)

    async def invoke_oneway(self, channel: ChannelHandle, request: RemotingCommand,
                            timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a oneway request to a connected client."""
        conn = channel._conn
        await self._invoke_oneway(conn, conn.remote_addr, request, timeout)


@asynccontextmanager
async def open_server(config: ServerConfig | None = None) -> AsyncIterator[TrioRemotingServer]:
    """Start a server for the duration of the block; ``server.port`` is set on entry."""
    server = TrioRemotingServer(config)
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
