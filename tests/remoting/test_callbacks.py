"""User callbacks (``invoke_async(..., callback)``): each runs exactly once, off the loop, and
what they do (block, shut the client down) never hurts the endpoint."""

from __future__ import annotations

import sys
import threading

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingError,
    RemotingServer,
    ResponseFuture,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from .conftest import ASYNC_ECHO, addr_of


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

    await client.invoke_async(addr, req(ASYNC_ECHO), 5, slow_callback)
    assert await trio.to_thread.run_sync(entered.wait, 10)
    results: list[RemotingCommand] = []

    async def second() -> None:
        results.append(await client.invoke_sync(addr, req(ASYNC_ECHO, body=b"2"), 3))

    with trio.fail_after(10):
        async with trio.open_nursery() as inner:
            inner.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            assert not results  # it waits for the one permit, held until the callback ends
            assert client.statistics().async_permits_free == 0
            gate.set()
    assert results[0].code == ResponseCode.SUCCESS and results[0].body == b"2"
    assert client.statistics().async_permits_free == 1


def _add_callbacks_during_shutdown(addr: str) -> tuple[list[Exception], int, int]:
    """Two threads add callbacks to a done future while the client shuts down; return the
    errors they met, how many callbacks were added and how many ran."""
    client = RemotingClient().start()
    fut = client.invoke_async(addr, req(ASYNC_ECHO), 5)
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

    client.invoke_async(blocking_server.addr, req(ASYNC_ECHO), 5, close_client)
    try:
        assert returned.wait(5), "shutdown() in a callback waited for its own thread"
    finally:
        client.shutdown()
    with pytest.raises(RemotingError, match="closed"):
        client.invoke_sync(blocking_server.addr, req(ASYNC_ECHO), 1)


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
        fut = client.invoke_async(f"127.0.0.1:{port}", req(ASYNC_ECHO), 30, callback)
        client.shutdown()  # while the handshake is pending
        assert done.wait(5)
        assert fut.done()
        assert isinstance(fut.cause, RemotingError)
        assert calls == [fut]
    finally:
        client.shutdown()
        listener.close()


def test_closing_the_callback_threads_does_not_wait_for_ever_on_a_stuck_callback() -> None:
    # Shutdown joined the callback executor without a bound: a callback that never
    # returned hung the client's shutdown for ever.
    from remoting._core._doors._threads import CallbackRunner

    from ..hangs import HANG_SECONDS, returns_within
    from ..logs import capture_logs

    runner = CallbackRunner("test-callback", 1, owner=object())
    stuck = threading.Event()
    entered = threading.Event()

    def enter_and_stick() -> None:  # stuck until the test ends
        entered.set()
        stuck.wait(600)

    runner.submit(enter_and_stick)
    assert entered.wait(5)
    try:
        with capture_logs() as events:
            returns_within(HANG_SECONDS, lambda: runner.close(timeout=0.2))
        assert [e["event"] for e in events] == ["callbacks.still_running"]
    finally:
        stuck.set()
