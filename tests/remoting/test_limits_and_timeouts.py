"""Timeouts, permits, pool saturation and isolation, the scanner, late responses."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode
from processors import EchoProcessor
from remoting import (
    ClientConfig,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
    open_client,
)

from ..factories import req
from ..logs import capture_logs
from .conftest import ECHO, GATED, GATED_ASYNC, AsyncGate, Gate, addr_of


async def test_timeout_raises_and_late_response_is_orphaned(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    client = TrioRemotingClient(ClientConfig(close_socket_if_timeout=False))
    await nursery.start(client.serve)
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    start = trio.current_time()
    with pytest.raises(RemotingTimeoutError) as info:
        await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.3)
    elapsed = trio.current_time() - start
    assert elapsed >= 0.25  # wall-clock: a lower bound (it waited for its deadline)
    assert info.value.timeout == 0.3
    assert client.statistics().in_flight == 0
    assert client.statistics().timeouts == 1
    with capture_logs() as logs:
        gate.event.set()
        # the late reply is queued before this call's reply on the same connection
        ok = await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
    assert ok.code == ResponseCode.SUCCESS
    assert client.statistics().orphaned_responses == 1
    assert [e["event"] for e in logs].count("response.orphaned") == 1


async def test_sync_timeout_closes_the_connection_by_default(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    """As RocketMQ's clientCloseSocketIfTimeout: the next call gets a fresh connection."""
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
    with pytest.raises(RemotingTimeoutError):
        await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.2)
    await trio.testing.wait_all_tasks_blocked()
    assert client.statistics().connections == 0  # closed at the timeout
    assert (await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)).code == 0
    assert client.statistics().connections_opened == 2
    gate.event.set()


async def test_async_timeout_keeps_the_connection(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    server.register_processor(GATED_ASYNC, AsyncGate())
    fut = await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=0.2)
    with pytest.raises(RemotingTimeoutError):
        await fut.wait()
    assert client.statistics().connections == 1
    assert client.statistics().connections_opened == 1


async def test_async_callback_fires_once_on_timeout(server: TrioRemotingServer) -> None:
    server.register_processor(GATED_ASYNC, AsyncGate())
    calls: list[object] = []
    async with open_client() as client:
        fut = await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=0.2,
                                        callback=calls.append)
        with pytest.raises(RemotingTimeoutError):
            await fut.wait()
        assert fut.is_timeout
    # a client that stopped has run every queued callback
    assert calls == [fut]


async def test_burst_of_timeouts_does_not_leak_permits(nursery: trio.Nursery) -> None:
    """Regression for apache/rocketmq#604: every timed-out call gives its permit back."""
    server = TrioRemotingServer(ServerConfig())
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    server.register_processor(ECHO, EchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=10,
                                             close_socket_if_timeout=False))
    await nursery.start(client.serve)

    async def call() -> None:
        with pytest.raises(RemotingTimeoutError):
            await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.3)

    async with trio.open_nursery() as burst:
        for _ in range(10):
            burst.start_soon(call)
    assert client.statistics().async_permits_free == 10
    assert client.statistics().in_flight == 0
    gate.event.set()
    for _ in range(30):  # more calls than permits: each must get one back
        response = await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)
        assert response.code == ResponseCode.SUCCESS
    assert client.statistics().async_permits_free == 10


async def test_exhausted_permits_raise_too_many_requests_within_timeout(
    nursery: trio.Nursery,
) -> None:
    server = TrioRemotingServer(ServerConfig())
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(client_async_semaphore_value=2))
    await nursery.start(client.serve)
    held = [await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=10)
            for _ in range(2)]
    # TooManyRequests, not RemotingTimeoutError: the timeout ended the wait for a permit
    with pytest.raises(RemotingTooManyRequestsError):
        await client.invoke_sync(addr_of(server), req(GATED_ASYNC), timeout=0.3)
    gate.event.set()
    for fut in held:
        assert (await fut.wait()).code == ResponseCode.SUCCESS
    assert client.statistics().async_permits_free == 2


async def test_saturated_pool_answers_overload_at_once_and_other_codes_are_not_delayed(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    gate = Gate()
    server = TrioRemotingServer(ServerConfig(processor_queue_capacity=0))
    server.register_processor(ECHO, EchoProcessor())
    # one thread and no queue: the second request to GATED cannot be taken
    server.register_processor(GATED, gate, threads=1)
    await nursery.start(server.serve)
    first = await client.invoke_async(addr_of(server), req(GATED), timeout=10)
    assert await trio.to_thread.run_sync(gate.entered.acquire, True, 5)
    # both answered while GATED's one thread is stuck until the gate opens below: neither
    # waited for it (they would time out)
    busy = await client.invoke_sync(addr_of(server), req(GATED), timeout=5)
    assert busy.code == ResponseCode.SYSTEM_BUSY
    assert busy.remark is not None and busy.remark.startswith("[OVERLOAD]")
    other = await client.invoke_sync(addr_of(server), req(ECHO, b"b"), timeout=5)
    assert other.body == b"b"  # code ECHO has its own pool
    gate.release()
    assert (await first.wait()).code == ResponseCode.SUCCESS
    assert gate.calls == 1


async def test_blocked_pool_for_one_code_does_not_delay_another(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    gate = Gate()
    server.register_processor(GATED, gate, threads=2)
    pending = [await client.invoke_async(addr_of(server), req(GATED), timeout=10)
               for _ in range(5)]  # both threads blocked, three queued
    for _ in range(20):
        with trio.fail_after(2):
            assert (await client.invoke_sync(addr_of(server), req(ECHO), timeout=5)).code == 0
    gate.release()
    for fut in pending:
        assert (await fut.wait()).code == ResponseCode.SUCCESS


async def test_scanner_expires_entries_after_grace_when_precise_timeouts_are_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The RocketMQ-style sweep: first after 3 s, every 1 s, 1 s grace (gated: nothing real)."""
    async with trio.open_nursery() as nursery:
        server = TrioRemotingServer(ServerConfig())
        server.register_processor(GATED_ASYNC, AsyncGate())
        await nursery.start(server.serve)
        client = TrioRemotingClient(ClientConfig(precise_timeouts=False))
        await nursery.start(client.serve)
        start = trio.current_time()
        fut = await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=0.5)
        with pytest.raises(RemotingTimeoutError):
            await fut.wait()
        waited = trio.current_time() - start
        # due at 0.5 + 1 s grace; the first sweep is at 3 s
        assert 3.0 <= waited < 4.1
        assert client.statistics().in_flight == 0
        nursery.cancel_scope.cancel()


async def test_precise_timer_fires_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        server = TrioRemotingServer(ServerConfig())
        server.register_processor(GATED_ASYNC, AsyncGate())
        await nursery.start(server.serve)
        client = TrioRemotingClient(ClientConfig())
        await nursery.start(client.serve)
        await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=50)
        start = trio.current_time()
        fut = await client.invoke_async(addr_of(server), req(GATED_ASYNC), timeout=7)
        with pytest.raises(RemotingTimeoutError):
            await fut.wait()
        assert 7.0 <= trio.current_time() - start < 7.1
        nursery.cancel_scope.cancel()


async def test_a_flood_of_overloaded_requests_is_logged_sparingly(
    nursery: trio.Nursery, client: TrioRemotingClient,
) -> None:
    # One processor.overloaded warning per refused request: a peer flooding a full pool
    # (20,000 requests in half a second) wrote as many log records.
    from ..logs import capture_logs

    gate = Gate()
    server = TrioRemotingServer(ServerConfig(processor_queue_capacity=0))
    server.register_processor(GATED, gate, threads=1)
    await nursery.start(server.serve)
    first = await client.invoke_async(addr_of(server), req(GATED), timeout=10)
    assert await trio.to_thread.run_sync(gate.entered.acquire, True, 5)
    with capture_logs() as logs:
        results = await client.invoke_many(addr_of(server), [req(GATED) for _ in range(100)],
                                           timeout=5)
    assert {r.code if isinstance(r, RemotingCommand) else r for r in results} == {
        ResponseCode.SYSTEM_BUSY}
    warned = [e["refused_on_connection"] for e in logs if e["event"] == "processor.overloaded"]
    assert warned == [1, 2, 4, 8, 16, 32, 64]
    gate.release()
    assert (await first.wait()).code == ResponseCode.SUCCESS
