"""A client after-hook that raises is logged; the call's outcome stays its response, the other
after-hooks still run, and an async call's callback still runs exactly once."""

from __future__ import annotations

import threading

import trio

from codec import ResponseCode
from remoting import (
    RemotingClient,
    RemotingServer,
    ResponseFuture,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from ..logs import capture_logs
from .conftest import ECHO, addr_of
from .test_hooks import Recording


def _hooked(client: RemotingClient | TrioRemotingClient, log: list[str]) -> None:
    client.register_rpc_hook(Recording("a", log, fail_after=True))
    client.register_rpc_hook(Recording("b", log))


def _failures(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in logs if e["event"] == "hook.failed"]


def test_blocking_invoke_async_runs_its_callback_once(blocking_server: RemotingServer,
                                                      blocking_client: RemotingClient) -> None:
    log: list[str] = []
    _hooked(blocking_client, log)
    ran: list[ResponseFuture] = []
    done = threading.Event()

    def callback(fut: ResponseFuture) -> None:
        ran.append(fut)
        done.set()

    with capture_logs() as logs:
        fut = blocking_client.invoke_async(blocking_server.addr, req(ECHO), 5, callback)
        assert done.wait(10), "the callback never ran"
        assert fut.result().code == ResponseCode.SUCCESS
    assert ran == [fut]
    assert log == ["a.before", "b.before", "a.after:0", "b.after:0"]
    [failed] = _failures(logs)
    assert failed["method"] == "do_after_response" and failed["hook"] == "Recording"


def test_blocking_invoke_sync_returns_the_response(blocking_server: RemotingServer,
                                                  blocking_client: RemotingClient) -> None:
    log: list[str] = []
    _hooked(blocking_client, log)
    with capture_logs() as logs:
        response = blocking_client.invoke_sync(blocking_server.addr, req(ECHO), 5)
    assert response.code == ResponseCode.SUCCESS
    assert log == ["a.before", "b.before", "a.after:0", "b.after:0"]
    assert len(_failures(logs)) == 1


async def test_trio_calls_return_the_response_and_run_the_callback_once(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    log: list[str] = []
    _hooked(client, log)
    ran: list[ResponseFuture] = []
    done = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def callback(fut: ResponseFuture) -> None:  # on the callback executor
        ran.append(fut)
        trio.from_thread.run_sync(done.set, trio_token=token)

    with capture_logs() as logs:
        response = await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
        assert response.code == ResponseCode.SUCCESS
        fut = await client.invoke_async(addr_of(server), req(ECHO), timeout=5,
                                        callback=callback)
        with trio.fail_after(10):
            await done.wait()
    assert ran == [fut]
    assert log.count("b.after:0") == 2
    assert len(_failures(logs)) == 2
