"""Calls from threads other than the loop's: handed to the loop in batches (a pool thread's
lone reply is sent by the thread itself through the connection's send gate). Every call still
completes exactly once, whatever ends it, and no thread ever breaks the loop."""

from __future__ import annotations

import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode, SerializeType
from processors import AsyncEchoProcessor, AsyncRequestProcessor, RequestContext
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTimeoutError,
    ServerConfig,
)

from ..factories import req
from .conftest import ASYNC_ECHO, ECHO, GATED, Gate, install_standard_processors

HANG_UP = 41


class HangUp(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        ctx.channel.close()
        return None


def test_calls_from_many_threads_each_get_their_own_answer(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    addr = blocking_server.addr
    blocking_client.invoke_sync(addr, req(ECHO), timeout=5)  # connect first

    def work(t: int) -> list[bytes | None]:
        out: list[bytes | None] = []
        for i in range(200):
            code = ECHO if i % 2 else ASYNC_ECHO
            st = SerializeType.JSON if i % 3 else SerializeType.ROCKETMQ
            body = b"%d-%d" % (t, i)
            out.append(blocking_client.invoke_sync(addr, req(code, body, st), timeout=10).body)
            if i % 50 == 0:  # an async call in between goes through the loop
                fut = blocking_client.invoke_async(addr, req(ASYNC_ECHO, b"a"), timeout=10)
                assert fut.result(10).body == b"a"
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for t, bodies in enumerate(results):
        assert bodies == [b"%d-%d" % (t, i) for i in range(200)]
    stats = blocking_client.statistics()
    assert stats.in_flight == 0
    assert stats.connections == 1
    assert sum(stats.requests_sent.values()) == 1 + 8 * 200 + 8 * 4


def test_the_same_command_from_many_threads_gets_its_answers(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    addr = blocking_server.addr
    same = req(ASYNC_ECHO, b"same")
    with ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(lambda _: blocking_client.invoke_sync(addr, same, 10).body,
                               range(400)))
    assert bodies == [b"same"] * 400
    assert blocking_client.statistics().in_flight == 0


def test_a_direct_call_times_out_at_its_deadline() -> None:
    assert _direct_call_timed_out_after() >= 0.3  # wall-clock: a lower bound (the deadline)


@pytest.mark.slow
def test_a_direct_call_times_out_within_3_s_of_its_deadline() -> None:
    assert _direct_call_timed_out_after() < 0.3 + 3.0


def _direct_call_timed_out_after() -> float:
    """Return how long a direct call with a 0.3 s timeout took to raise
    `RemotingTimeoutError` (its processor never answers)."""
    server = RemotingServer(ServerConfig())
    gate = Gate()
    server.register_processor(GATED, gate)
    install_standard_processors(server)
    # No scanner sweep for a minute, and the calling thread's own fallback comes 5 s after
    # the deadline: the loop's timer is the only thing that can end the call within 3 s.
    # (Bounds of a second or so past the deadline are a loaded machine's scheduling noise.)
    client = RemotingClient(ClientConfig(scan_initial_delay=60)).start()
    try:
        with server:
            client.invoke_sync(server.addr, req(ECHO), timeout=5)  # connected, idle timer
            start = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                client.invoke_sync(server.addr, req(GATED), timeout=0.3)
            took = time.monotonic() - start
            gate.release()
        assert client.statistics().in_flight == 0
    finally:
        client.shutdown()
    return took


def test_a_connection_closed_under_a_direct_call_fails_it_fast(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    blocking_server.register_processor(HANG_UP, HangUp())
    addr = blocking_server.addr
    blocking_client.invoke_sync(addr, req(ECHO), timeout=5)
    with pytest.raises(RemotingSendRequestError):  # not RemotingTimeoutError: it did not wait
        blocking_client.invoke_sync(addr, req(HANG_UP), timeout=30)
    assert blocking_client.invoke_sync(addr, req(ECHO, b"again"), timeout=5).body == b"again"


@pytest.mark.parametrize("code", [ECHO, ASYNC_ECHO])
def test_large_frames_from_threads_arrive_whole(
    blocking_server: RemotingServer, blocking_client: RemotingClient, code: int,
) -> None:
    """Sent from the calling thread as (head, body) pieces, answered from the pool thread or
    the loop; the socket takes part of each at once and the writer the rest."""
    addr = blocking_server.addr
    blocking_client.invoke_sync(addr, req(ECHO), timeout=5)  # connected: the direct path
    bodies = [bytes([i]) * (3 << 20) for i in range(4)] + [bytes(range(256)) * 1024]

    def call(body: bytes) -> bytes | None:
        return blocking_client.invoke_sync(addr, req(code, body), timeout=20).body

    with ThreadPoolExecutor(3) as pool:  # about 9 MiB in flight on one connection
        assert list(pool.map(call, bodies)) == bodies
    assert blocking_client.statistics().in_flight == 0


def test_threads_calling_while_the_server_stops_all_return() -> None:
    server = RemotingServer(ServerConfig())
    install_standard_processors(server)
    server.start()
    client = RemotingClient(ClientConfig()).start()
    addr = server.addr
    client.invoke_sync(addr, req(ECHO), timeout=5)
    outcomes: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    going = threading.Event()

    def work() -> None:
        while not stop.is_set():
            try:
                client.invoke_sync(addr, req(ASYNC_ECHO), timeout=3)
                kind = "ok"
            except RemotingError as exc:
                kind = type(exc).__name__
            with lock:
                outcomes.append(kind)
                if len(outcomes) >= 300:
                    going.set()

    threads = [threading.Thread(target=work) for _ in range(6)]
    try:
        for t in threads:
            t.start()
        assert going.wait(10)  # the callers are in full swing
        server.shutdown(grace=0.5)
        stop.set()
        deadline = time.monotonic() + 10
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads)  # nobody hangs
    finally:
        stop.set()
        client.shutdown()
        server.shutdown()  # idempotent; here in case the test failed before its own call
    assert "ok" in outcomes
    # a lost call would end as RemotingTimeoutError: none may
    assert set(outcomes) <= {"ok", "RemotingSendRequestError", "RemotingConnectError"}


def test_a_lone_pool_reply_is_sent_by_its_pool_thread(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    addr = blocking_server.addr
    before = blocking_server.statistics().sent_by_threads
    for i in range(50):  # one at a time: each request is alone in its pool batch
        assert blocking_client.invoke_sync(addr, req(ECHO, b"%d" % i), timeout=5).body == (
            b"%d" % i)
    # nearly all (a reply may find the connection busy and go through the loop)
    assert blocking_server.statistics().sent_by_threads - before >= 45


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
    warm = await trio.to_thread.run_sync(blocking_client.invoke_sync, addr, req(ASYNC_ECHO), 5)
    assert warm.code == ResponseCode.SUCCESS
    with trio.fail_after(10):
        fut = blocking_client.invoke_async(addr, req(ASYNC_ECHO, body=b"a"), 5)
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
    again = await trio.to_thread.run_sync(blocking_client.invoke_sync, addr,
                                          req(ASYNC_ECHO, body=b"b"), 5)
    assert again.body == b"b"


def test_a_bad_address_type_fails_the_call_not_the_client(
    blocking_server: RemotingServer, blocking_client: RemotingClient,
) -> None:
    with pytest.raises(RemotingConnectError):
        blocking_client.invoke_sync(("127.0.0.1", 1), req(ASYNC_ECHO), 2)  # type: ignore[arg-type]
    ok = blocking_client.invoke_sync(blocking_server.addr, req(ASYNC_ECHO, body=b"ok"), 5)
    assert ok.body == b"ok"


def test_channel_calls_after_shutdown_keep_raising() -> None:
    server = RemotingServer().start()
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    try:
        with RemotingClient() as client:
            client.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
            client.invoke_sync(server.addr, req(ASYNC_ECHO), 5)
            [channel] = server.channels()
            server.shutdown()
            for _ in range(3):  # every call, not only the first, must say so
                with pytest.raises(RemotingError):
                    channel.invoke_async(req(ASYNC_ECHO), 1)
    finally:
        server.shutdown()  # idempotent: stops it if the test failed before its own call
