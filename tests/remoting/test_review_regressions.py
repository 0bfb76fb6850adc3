"""Regression tests for defects found in review: none of these may hang or kill an endpoint."""

from __future__ import annotations

import threading

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingServer,
    ResponseFuture,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import ASYNC_ECHO, addr_of


def req(code: int = ASYNC_ECHO, body: bytes = b"x") -> RemotingCommand:
    return RemotingCommand.create_request(code, body=body)


async def test_invoke_many_with_few_permits_waits_for_them_instead_of_failing(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=4))
    await nursery.start(client.serve)
    results = await client.invoke_many(addr_of(server), [req() for _ in range(20)], 5, limit=4)
    assert all(r.code == ResponseCode.SUCCESS for r in results)  # type: ignore[union-attr]
    assert client.endpoint.async_permits.value == 4


def test_a_bad_address_type_fails_the_call_not_the_client(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    with pytest.raises(RemotingConnectError):
        blocking_client.invoke_sync(("127.0.0.1", 1), req(), 2)  # type: ignore[arg-type]
    assert blocking_client.invoke_sync(blocking_server.addr, req(body=b"ok"), 5).body == b"ok"


def test_channel_calls_after_shutdown_keep_raising() -> None:
    server = RemotingServer().start()
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    try:
        with RemotingClient() as client:
            client.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
            client.invoke_sync(server.addr, req(), 5)
            [channel] = server.channels()
            server.shutdown()
            for _ in range(3):  # every call, not only the first, must say so
                with pytest.raises(RemotingError):
                    channel.invoke_async(req(), 1)
    finally:
        server.shutdown()  # idempotent: stops it if the test failed before its own call


def test_shutdown_ends_a_call_still_connecting_and_its_callback_runs_once() -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel completes the TCP connect; nobody answers the TLS hello
    port = listener.getsockname()[1]
    calls: list[ResponseFuture] = []
    done = threading.Event()

    def callback(fut: ResponseFuture) -> None:
        calls.append(fut)
        done.set()

    client = RemotingClient(ClientConfig(use_tls=True, connect_timeout=30)).start()
    try:
        fut = client.invoke_async(f"127.0.0.1:{port}", req(), 30, callback)
        client.shutdown()  # while the handshake is pending
        assert done.wait(5)
        assert fut.done()
        assert isinstance(fut.cause, RemotingError)
        assert calls == [fut]
    finally:
        client.shutdown()
        listener.close()
