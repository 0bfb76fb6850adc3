"""Regression tests for defects found in the third review (real sockets on 127.0.0.1)."""

from __future__ import annotations

import socket
import sys
import threading
import time

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingError,
    RemotingServer,
    ResponseFuture,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from .conftest import ASYNC_ECHO, GATED, Gate, addr_of


def req(code: int = ASYNC_ECHO, body: bytes = b"x") -> RemotingCommand:
    return RemotingCommand.create_request(code, body=body)


async def test_a_permit_freed_after_a_callback_wakes_a_waiting_call(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    # The permit of a call with a callback comes back after the callback ran, on the callback
    # thread. trio.Semaphore is not thread-safe: releasing it there must not touch the loop's
    # scheduler (it raised in the callback thread, left the waiter parked, and at the
    # waiter's deadline trio died with TrioInternalError).
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=1))
    await nursery.start(client.serve)
    addr = addr_of(server)
    gate, entered = threading.Event(), threading.Event()

    def slow_callback(_: ResponseFuture) -> None:
        entered.set()
        gate.wait(10)

    await client.invoke_async(addr, req(), 5, slow_callback)
    assert await trio.to_thread.run_sync(entered.wait, 10)
    results: list[RemotingCommand] = []

    async def second() -> None:
        results.append(await client.invoke_sync(addr, req(body=b"2"), 3))

    with trio.fail_after(10):
        async with trio.open_nursery() as inner:
            inner.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            assert client.endpoint.async_permits.statistics().tasks_waiting == 1
            gate.set()
    assert results[0].code == ResponseCode.SUCCESS and results[0].body == b"2"
    assert client.endpoint.async_permits.value == 1


def test_blocking_server_channels_while_clients_come_and_go() -> None:
    # RemotingServer.channels() runs in the caller's thread while the loop adds and removes
    # connections: it iterated the loop's set and raised "Set changed size during iteration".
    server = RemotingServer(ServerConfig()).start()
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(100)]
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the race shows within a few thousand calls
    try:
        end = time.monotonic() + 3.0
        calls = 0
        while calls < 20_000 and time.monotonic() < end:
            assert all(ch.remote_addr for ch in server.channels())
            calls += 1
    finally:
        sys.setswitchinterval(interval)
        stop.set()
        churner.join(10)
        for s in held:
            s.close()
        server.shutdown()


async def test_a_blocking_clients_future_awaited_from_another_trio_loop(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    # user-guide: ResponseFuture has `await wait()` (trio). Awaited from a trio loop other than
    # the client's, completion rescheduled a foreign task from the client's loop thread:
    # AssertionError in the client's reader, its connection lost, and the waiter never woke.
    gate = Gate()
    blocking_server.register_processor(GATED, gate)
    addr = blocking_server.addr
    warm = await trio.to_thread.run_sync(blocking_client.invoke_sync, addr, req(), 5)
    assert warm.code == ResponseCode.SUCCESS
    with trio.fail_after(10):
        fut = blocking_client.invoke_async(addr, req(body=b"a"), 5)
        assert (await fut.wait()).body == b"a"

        # a waiter cancelled before completion, then one that stays: neither loop breaks
        gated = blocking_client.invoke_async(addr, req(GATED, b"g"), 5)
        assert await trio.to_thread.run_sync(gate.entered.acquire, True, 10)
        with trio.CancelScope() as scope:
            scope.cancel()
            await gated.wait()
        async with trio.open_nursery() as nursery:
            got: list[bytes | None] = []

            async def waiter() -> None:
                got.append((await gated.wait()).body)

            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            gate.release()
        assert got == [b"g"]
    assert blocking_client.statistics().connections == 1  # the connection survived
    again = await trio.to_thread.run_sync(blocking_client.invoke_sync, addr, req(body=b"b"), 5)
    assert again.body == b"b"


def _add_callbacks_during_shutdown(addr: str) -> tuple[list[Exception], int, int]:
    """Two threads add callbacks to a done future while the client shuts down; return the
    errors they met, how many callbacks were added and how many ran."""
    client = RemotingClient().start()
    fut = client.invoke_async(addr, req(), 5)
    assert fut.result().code == ResponseCode.SUCCESS
    added, ran, errors = [0, 0], [0], []
    lock = threading.Lock()
    stop = threading.Event()

    def count(_: ResponseFuture) -> None:
        with lock:
            ran[0] += 1

    def add(i: int) -> None:
        while not stop.is_set():
            try:
                fut.add_done_callback(count)
            except Exception as exc:
                errors.append(exc)
                return
            added[i] += 1

    adders = [threading.Thread(target=add, args=(i,)) for i in range(2)]
    for t in adders:
        t.start()
    client.shutdown()
    stop.set()
    for t in adders:
        t.join(10)
    return errors, sum(added), ran[0]


def test_callbacks_added_while_the_client_shuts_down_run_once_and_never_raise(
    blocking_server: RemotingServer,
) -> None:
    # add_done_callback on a done future submits to the callback executor; when shutdown
    # stopped that executor between the lookup and the submit, the caller got
    # RuntimeError('cannot schedule new futures after shutdown') and the callback never ran.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the race shows in the first rounds
    try:
        for _ in range(10):
            errors, added, ran = _add_callbacks_during_shutdown(blocking_server.addr)
            assert errors == []
            assert ran == added
    finally:
        sys.setswitchinterval(interval)


def test_shutdown_called_from_a_callback_does_not_wait_for_itself(
    blocking_server: RemotingServer,
) -> None:
    # shutdown() joined the loop thread, which joins the callback threads: called from a
    # callback it waited for itself until JOIN_TIMEOUT (10 s) ran out.
    client = RemotingClient().start()
    returned = threading.Event()

    def close_client(_: ResponseFuture) -> None:
        client.shutdown()
        returned.set()

    client.invoke_async(blocking_server.addr, req(), 5, close_client)
    try:
        assert returned.wait(5), "shutdown() in a callback waited for its own thread"
    finally:
        client.shutdown()
    with pytest.raises(RemotingError, match="closed"):
        client.invoke_sync(blocking_server.addr, req(), 1)


class Stop(RequestProcessor):
    """A sync processor that shuts its own server down (an admin "stop" command)."""

    def __init__(self) -> None:
        self.server: RemotingServer | None = None
        self.returned_after = -1.0

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        assert self.server is not None
        start = time.monotonic()
        self.server.shutdown()
        self.returned_after = time.monotonic() - start
        return RemotingCommand.create_response(ResponseCode.SUCCESS, remark="stopping")


def test_a_processor_shutting_down_its_own_server_neither_waits_for_itself_nor_loses_its_reply(
) -> None:
    # It waited out the grace period for itself (it is a running processor), then the pool's
    # join waited for it too (the thread calling shutdown): about 10 s and a warning.
    from structlog.testing import capture_logs

    stop = Stop()
    server = RemotingServer(ServerConfig(shutdown_grace_seconds=5)).start()
    stop.server = server
    server.register_processor(40, stop)
    client = RemotingClient().start()
    try:
        with capture_logs() as logs:
            start = time.monotonic()
            response = client.invoke_sync(server.addr, req(40), 10)
            assert response.code == ResponseCode.SUCCESS and response.remark == "stopping"
            assert 0 <= stop.returned_after < 2.0
            server.shutdown()  # from another thread: returns once the server has stopped
            assert time.monotonic() - start < 4.0
        assert not [e for e in logs if e["event"] in ("pool.threads_left_running",
                                                      "server.shutdown_forced")]
        assert not [t for t in threading.enumerate()
                    if t.name.startswith("remoting-server") and t.is_alive()]
        with pytest.raises(RemotingError):
            client.invoke_sync(server.addr, req(40), 2)
    finally:
        client.shutdown()
        server.shutdown()
