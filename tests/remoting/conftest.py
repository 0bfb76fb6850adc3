"""Fixtures: real servers and clients on 127.0.0.1 (trio-native and blocking)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import (
    AsyncEchoProcessor,
    AsyncRequestProcessor,
    EchoProcessor,
    RequestContext,
    RequestProcessor,
)
from remoting import (
    ChannelHandle,
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._faces._client_io import ThreadsIO

ECHO = 1  # sync pool processor
ASYNC_ECHO = 2  # event-loop processor
GATED = 3  # sync processor blocked on a threading.Event
RAISES = 4
REJECTS = 5
GATED_ASYNC = 6


class Gate(RequestProcessor):
    """Blocks each call until `release` (a real stall on a pool thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.entered = threading.Semaphore(0)
        self.calls = 0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        self.calls += 1
        self.entered.release()
        self.event.wait(30)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response

    def release(self) -> None:
        self.event.set()


class AsyncGate(AsyncRequestProcessor):
    """Async processor that waits on a trio.Event."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self.entered = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered.set()
        await self.event.wait()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


class Boom(RequestProcessor):
    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise ValueError("boom")


class Rejecting(RequestProcessor):
    def reject_request(self) -> bool:
        return True

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        raise AssertionError("a rejected request must not reach the processor")


def install_standard_processors(server: TrioRemotingServer | RemotingServer) -> None:
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    server.register_processor(RAISES, Boom())
    server.register_processor(REJECTS, Rejecting())


def addr_of(server: TrioRemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


@asynccontextmanager
async def stalled_flood(server: TrioRemotingServer, frame: bytes
                        ) -> AsyncIterator[ChannelHandle]:
    """A raw connection that sends `frame` over and over and never reads a response.

    Yields the server's channel of it once the server stopped reading it: its responses piled up
    past the write high water mark and every task is blocked. (How much more the flooder can
    push into the kernel's socket buffers is the kernel's business.) Closes it on exit.
    """
    high = server.config.write_buffer_high_water_mark
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    try:
        async with trio.open_nursery() as nursery:

            async def flood() -> None:
                while True:
                    await stream.send_all(frame)

            nursery.start_soon(flood)
            with trio.fail_after(10):
                while not any(c.queued_bytes > high for c in server.channels()):
                    await trio.testing.wait_all_tasks_blocked()
            [channel] = server.channels()
            await trio.testing.wait_all_tasks_blocked()
            yield channel
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()


@pytest.fixture
async def server(nursery: trio.Nursery) -> TrioRemotingServer:
    srv = TrioRemotingServer(ServerConfig())
    install_standard_processors(srv)
    await nursery.start(srv.serve)
    return srv


@pytest.fixture
async def client(nursery: trio.Nursery) -> TrioRemotingClient:
    cli = TrioRemotingClient(ClientConfig())
    await nursery.start(cli.serve)
    return cli


@pytest.fixture
def blocking_server() -> Iterator[RemotingServer]:
    srv = RemotingServer(ServerConfig())
    install_standard_processors(srv)
    srv.start()
    try:
        yield srv
    finally:
        srv.shutdown()


@pytest.fixture
def blocking_client() -> Iterator[RemotingClient]:
    cli = RemotingClient(ClientConfig()).start()
    try:
        yield cli
    finally:
        cli.shutdown()


def threads_io(client: RemotingClient) -> ThreadsIO:
    """The driver of a client made with ``io="threads"``."""
    assert isinstance(client._io, ThreadsIO)
    return client._io


def core_thread_of(client: RemotingClient) -> threading.Thread:
    """The thread that runs a started client's core: its loop (``io="loop"``, or the loop a
    thread-driven client starts for the server's requests), else its background reader."""
    io = client._io
    loop = io.loop if isinstance(io, ThreadsIO) else (io.loop or io._stopping)
    if loop is not None:
        assert loop._thread is not None
        return loop._thread
    assert isinstance(io, ThreadsIO)
    thread = io.driver.background.thread
    assert thread is not None, "the background reader starts with the first connection"
    return thread
