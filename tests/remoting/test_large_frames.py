"""Large bodies over real 127.0.0.1 sockets: zero-copy send, in-place receive, limits kept."""

from __future__ import annotations

import random

import pytest
import trio

from codec import LARGE_BODY_BYTES, RemotingCommand, SerializeType, encode_frame
from processors import AsyncEchoProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)
from remoting._core._sansio._connection_core import RECEIVE_BYTES, RECEIVE_INTO_MIN_BYTES
from remoting._core._sansio._receive_buffers import BufferPool

from ..factories import req
from ..logs import capture_logs
from .conftest import ASYNC_ECHO, ECHO, addr_of

MIB = 1 << 20
SIZES = [LARGE_BODY_BYTES - 1, LARGE_BODY_BYTES, LARGE_BODY_BYTES + 1,
         RECEIVE_BYTES + RECEIVE_INTO_MIN_BYTES + 1, MIB, 4 * MIB]


def payload(size: int, seed: int = 0) -> bytes:
    """Bytes that differ everywhere (a misplaced or repeated chunk cannot go unnoticed)."""
    return random.Random(size * 7919 + seed).randbytes(size)


def sized(code: int, body: bytes, st: SerializeType = SerializeType.JSON) -> RemotingCommand:
    return req(code, body, st, size=str(len(body)))


@pytest.mark.parametrize("st", list(SerializeType))
@pytest.mark.parametrize("code", [ECHO, ASYNC_ECHO])
@pytest.mark.parametrize("size", SIZES)
async def test_large_bodies_round_trip_byte_exact(
    server: TrioRemotingServer, client: TrioRemotingClient, size: int, code: int,
    st: SerializeType,
) -> None:
    body = payload(size)
    response = await client.invoke_sync(addr_of(server), sized(code, body, st), 20)
    assert response.code == 0
    assert type(response.body) is bytes
    assert response.body == body
    assert response.ext_fields == {"size": str(size)}
    assert response.serialize_type is st


@pytest.mark.parametrize("st", list(SerializeType))
@pytest.mark.parametrize("code", [ECHO, ASYNC_ECHO])
@pytest.mark.parametrize("size", [LARGE_BODY_BYTES, MIB, 4 * MIB])
def test_large_bodies_round_trip_with_the_blocking_client(
    blocking_server: RemotingServer, blocking_client: RemotingClient, size: int, code: int,
    st: SerializeType,
) -> None:
    body = payload(size)
    response = blocking_client.invoke_sync(blocking_server.addr, sized(code, body, st),
                                           timeout=20)
    assert response.body == body
    assert response.serialize_type is st


async def test_pipelined_large_and_small_requests_share_one_connection(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    """Large frames queued behind, and in front of, small ones: every answer is its own.

    In flight at once: about 3 MiB, under the 4 MiB high water mark: with more, both peers
    can stop reading at once (a back-pressure deadlock that predates zero-copy sends).
    """
    addr = addr_of(server)
    sizes = [MIB, 10, LARGE_BODY_BYTES, 0, 300_000, 200, LARGE_BODY_BYTES + 1, 5] * 2
    results: dict[int, bytes | None] = {}

    async def call(i: int, size: int) -> None:
        body = payload(size, seed=i)
        code = ECHO if i % 2 else ASYNC_ECHO
        response = await client.invoke_sync(addr, sized(code, body, SerializeType(i % 2)), 30)
        results[i] = response.body
        assert (response.body or b"") == body

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i, size in enumerate(sizes):
                nursery.start_soon(call, i, size)
    assert len(results) == len(sizes)
    stats = client.statistics()
    assert stats.connections == 1
    assert stats.frames_written == len(sizes)
    assert stats.queued_bytes == 0


async def test_oneway_large_frames_free_their_permits(
    server: TrioRemotingServer, nursery: trio.Nursery,
) -> None:
    client = TrioRemotingClient(ClientConfig(client_oneway_semaphore_value=2))
    await nursery.start(client.serve)
    addr = addr_of(server)
    for i in range(10):  # more than the permits: each comes back once its frame is sent
        await client.invoke_oneway(addr, sized(ASYNC_ECHO, payload(MIB, seed=i)), timeout=10)
    response = await client.invoke_sync(addr, sized(ASYNC_ECHO, b"after"), 10)
    assert response.body == b"after"


async def test_stalled_large_frame_is_closed_after_the_partial_frame_timeout(
    nursery: trio.Nursery,
) -> None:
    """The in-place receive of a frame's rest is bounded by partial_frame_timeout too."""
    server = TrioRemotingServer(ServerConfig(partial_frame_timeout=0.3))
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    frame = encode_frame(sized(ASYNC_ECHO, payload(MIB)))
    slow = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with slow:
        with capture_logs() as logs:
            # timed from before the send: the server may read it all (and start its timer)
            # before send_all returns to this task
            start = trio.current_time()
            await slow.send_all(frame[: RECEIVE_BYTES + 1000])  # the prefix and then some
            with trio.fail_after(5):
                try:
                    while await slow.receive_some(10):
                        pass
                except trio.BrokenResourceError:
                    pass
        elapsed = trio.current_time() - start
    assert elapsed >= 0.3  # wall-clock: a lower bound (the stall had its timeout)
    [stalled] = [e for e in logs if e["event"] == "connection.stalled"]
    assert stalled["buffered_bytes"] >= RECEIVE_BYTES


async def test_peer_closing_mid_large_frame_closes_the_connection(
    server: TrioRemotingServer, client: TrioRemotingClient,
) -> None:
    frame = encode_frame(sized(ASYNC_ECHO, payload(MIB)))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    await stream.send_all(frame[: len(frame) // 2])
    with capture_logs() as logs, trio.fail_after(5):
        while not server.statistics().connections:
            await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()  # the server has read what was sent
        await stream.aclose()
        while server.statistics().connections:
            await trio.testing.wait_all_tasks_blocked()
    [closed] = [e for e in logs if e["event"] == "connection.closed"]
    assert closed["reason"] == "peer closed the connection mid-frame"
    # the server is fine
    body = payload(MIB, seed=3)
    assert (await client.invoke_sync(addr_of(server), sized(ASYNC_ECHO, body), 10)).body == body


def test_buffer_pool_keeps_at_most_its_budget() -> None:
    pool = BufferPool(3 * MIB)
    a, b = pool.take(MIB), pool.take(2 * MIB)
    assert len(a) == MIB and len(b) == 2 * MIB
    pool.give(a)
    pool.give(b)
    assert pool.take(MIB + 1) is b  # big enough: reused
    assert pool.take(100) is a
    assert len(pool.take(10)) == 10  # none left: a fresh one
    pool.give(bytearray(4 * MIB))  # over the budget on its own: dropped
    assert len(pool.take(4 * MIB)) == 4 * MIB
    pool.give(a)
    pool.give(b)
    big = bytearray(2 * MIB + 10)
    pool.give(big)  # room made by dropping the smaller buffers (a, then b)
    assert pool.take(2 * MIB + 5) is big
    fresh = pool.take(MIB)
    assert fresh is not a and fresh is not b
    pool.give(b)
    pool.give(a)  # 3 MiB kept: exactly the budget
    pool.give(bytearray(10))  # no room, and everything kept is bigger: dropped
    assert pool.take(10) is a
    assert pool.take(10) is b


async def test_more_in_flight_than_both_high_water_marks_does_not_deadlock(
    nursery: trio.Nursery,
) -> None:
    """Both sides over their high water mark at once: the server pauses reading requests, but
    a client must keep reading responses, or each would wait for the other for ever."""
    high = 256 * 1024
    config = {"write_buffer_high_water_mark": high, "write_buffer_low_water_mark": high // 4}
    server = TrioRemotingServer(ServerConfig(**config))  # type: ignore[arg-type]
    server.register_processor(ASYNC_ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig(**config))  # type: ignore[arg-type]
    await nursery.start(client.serve)
    bodies = [payload(MIB)[: MIB - i] for i in range(16)]  # 16 MiB in flight on one connection
    results: dict[int, bytes | None] = {}

    async def call(i: int) -> None:
        response = await client.invoke_sync(addr_of(server), sized(ASYNC_ECHO, bodies[i]), 30)
        results[i] = response.body

    with trio.fail_after(20):
        async with trio.open_nursery() as calls:
            for i in range(16):
                calls.start_soon(call, i)
    assert [results[i] for i in range(16)] == bodies
