"""Shutting an endpoint down from code running on its own event loop (an async processor)."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import (
    RemotingClient,
    RemotingError,
    RemotingServer,
    ServerConfig,
    TrioRemotingServer,
    open_client,
    open_server,
)

from ..factories import req
from ..hangs import HANG_SECONDS, returns_within
from ..logs import capture_logs
from .conftest import core_thread_of

STOP = 40


class BlockingStop(AsyncRequestProcessor):
    """An async processor (on the loop thread) that calls the blocking face's shutdown."""

    def __init__(self, face: RemotingServer | RemotingClient) -> None:
        self.face = face
        self.error: BaseException | None = None
        self.returned_after = -1.0
        self.done = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        start = time.monotonic()
        try:
            self.face.shutdown()
        except BaseException as exc:
            self.error = exc
        self.returned_after = time.monotonic() - start
        self.done.set()
        return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="stopping")


def _port_is_free(port: int) -> bool:
    """True once nothing listens on ``port`` (SO_REUSEADDR: closed connections in TIME_WAIT
    do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_an_async_processor_stops_its_blocking_server_and_returns_at_once() -> None:
    # a grace of a minute: a shutdown that waited it out would hang, and the processor's call
    # (10 s) would time out
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=60)).start()
    stop = BlockingStop(server)
    server.register_processor(STOP, stop)
    port = server.port
    loop = server._loop
    assert loop is not None
    client = RemotingClient().start()
    try:
        with capture_logs() as logs:
            response = client.invoke_sync(server.addr, req(STOP), 10)
            assert stop.error is None
            assert response.code == ResponseCode.SUCCESS and response.remark == "stopping"
            assert stop.returned_after >= 0
            # from another thread: waits for the shutdown begun inside
            returns_within(HANG_SECONDS, server.shutdown)
        assert not loop.alive
        assert _port_is_free(port)
        assert not [e for e in logs if e["event"] == "server.shutdown_forced"]
        with pytest.raises(RemotingError):
            client.invoke_sync(f"127.0.0.1:{port}", req(STOP), 2)
    finally:
        client.shutdown()
        server.shutdown()


def test_an_async_processor_stops_its_blocking_client_and_returns_at_once() -> None:
    server = RemotingServer().start()
    client = RemotingClient().start()
    stop = BlockingStop(client)
    client.register_processor(STOP, stop)
    try:
        client.invoke_sync(server.addr, req(1), 10)  # a connection the server can call back
        [channel] = server.channels()
        server.invoke_oneway(channel, req(STOP))
        assert stop.done.wait(10)
        assert stop.error is None
        assert 0 <= stop.returned_after < 2.0
        loop = core_thread_of(client)  # the loop the async processor ran on
        loop.join(10)
        assert not loop.is_alive()
        assert not client.is_running
        with pytest.raises(RemotingError):
            client.invoke_sync(server.addr, req(1), 2)
    finally:
        client.shutdown()
        server.shutdown()


class TrioStop(AsyncRequestProcessor):
    """Awaits its own trio server's shutdown."""

    def __init__(self) -> None:
        self.server: TrioRemotingServer | None = None

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        assert self.server is not None
        await self.server.shutdown()
        return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="stopped")


async def test_awaiting_its_own_trio_server_shutdown_does_not_wait_for_itself() -> None:
    stop = TrioStop()
    with capture_logs() as logs:
        async with open_server(ServerConfig(shutdown_grace_seconds=30)) as server:
            stop.server = server
            server.register_processor(STOP, stop)
            async with open_client() as client:
                with trio.fail_after(10):
                    response = await client.invoke_sync(
                        f"127.0.0.1:{server.port}", req(STOP), timeout=20)
    assert response.code == ResponseCode.SUCCESS and response.remark == "stopped"
    assert not [e for e in logs if e["event"] == "server.shutdown_forced"]
