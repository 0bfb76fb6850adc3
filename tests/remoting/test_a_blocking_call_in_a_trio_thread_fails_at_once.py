"""A blocking call made in a thread that runs trio raises `RuntimeError` at once, naming what
to use there. It hung until its timeout (then `RemotingTimeoutError`): a trio server in the same
loop could never answer, the loop being blocked by the call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

import remoting
from remoting import RemotingClient, RemotingServer, ServerConfig

from ..factories import req
from .conftest import ECHO, install_standard_processors

CALL_TIMEOUT = 5.0  # what a hang would cost before the fix (bounded)


def refused_at_once(call: Callable[[], Any]) -> RuntimeError:
    """Return the `RuntimeError` ``call`` raises (a call that waited for its timeout would
    raise `RemotingTimeoutError` instead)."""
    with pytest.raises(RuntimeError) as caught:
        call()
    return caught.value


async def test_the_blocking_client_refuses_calls_in_a_trio_thread() -> None:
    async with remoting.open_server(ServerConfig()) as server:
        install_standard_processors(server)
        addr = f"127.0.0.1:{server.port}"
        with RemotingClient() as client:
            for name, call in [
                ("invoke_sync", lambda: client.invoke_sync(addr, req(ECHO), CALL_TIMEOUT)),
                ("invoke_oneway", lambda: client.invoke_oneway(addr, req(ECHO), CALL_TIMEOUT)),
                ("invoke_many", lambda: client.invoke_many(addr, [req(ECHO)], CALL_TIMEOUT)),
            ]:
                error = refused_at_once(call)
                assert f"RemotingClient.{name} blocks" in str(error)
                assert "remoting.open_client()" in str(error)  # what to use instead


async def test_invoke_async_works_in_a_trio_thread_and_its_future_is_awaited() -> None:
    async with remoting.open_server(ServerConfig()) as server:
        install_standard_processors(server)
        with RemotingClient() as client:
            future = client.invoke_async(f"127.0.0.1:{server.port}", req(ECHO, b"hi"),
                                         CALL_TIMEOUT)
            error = refused_at_once(future.result)  # pending: result() would block the loop
            assert "await future.wait()" in str(error)
            with trio.fail_after(CALL_TIMEOUT):
                await future.wait()
            assert future.result().body == b"hi"  # done: result() does not block


async def test_the_blocking_client_still_works_from_a_worker_thread() -> None:
    async with remoting.open_server(ServerConfig()) as server:
        install_standard_processors(server)
        with RemotingClient() as client:
            response = await trio.to_thread.run_sync(
                client.invoke_sync, f"127.0.0.1:{server.port}", req(ECHO, b"ok"), CALL_TIMEOUT)
    assert response.body == b"ok"


async def test_the_blocking_server_refuses_calls_to_its_clients_in_a_trio_thread() -> None:
    with RemotingServer(ServerConfig()) as server:
        install_standard_processors(server)
        async with remoting.open_client() as client:
            await client.invoke_sync(server.addr, req(ECHO), CALL_TIMEOUT)
            [channel] = await trio.to_thread.run_sync(server.channels)
            error = refused_at_once(lambda: server.invoke_sync(channel, req(ECHO), 1))
            assert "TrioRemotingServer" in str(error)


async def test_a_blocking_server_used_in_a_trio_thread_shuts_down_gracefully() -> None:
    # its shutdown hands the graceful part to the server's loop: trio.from_thread refuses to
    # do that from a thread running trio, so it raised RuntimeError and skipped the grace
    server = RemotingServer(ServerConfig()).start()
    server.shutdown(grace=1)
    with pytest.raises(remoting.RemotingError, match="is closed"):
        server.start()
