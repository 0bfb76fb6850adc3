"""The early flush (16 queued frames sent at once) must wake whoever waits for the queue to
drain, as the writer does: found in review, where waiters were left parked for good."""

from __future__ import annotations

import trio
import trio.testing

from codec import RemotingCommand, ResponseCode, encode_frame_parts
from remoting import ClientConfig, ServerConfig, TrioRemotingClient, TrioRemotingServer
from remoting._core._connection import Connection

from .conftest import ASYNC_ECHO, install_standard_processors


def orphan_frame(size: int) -> bytes:
    """A response nobody waits for: the client only counts it as orphaned."""
    cmd = RemotingCommand.create_response(ResponseCode.SUCCESS)
    cmd.opaque = 2_000_000_000
    cmd.body = b"x" * size
    frame = encode_frame_parts(cmd)
    assert isinstance(frame, bytes)
    return frame


async def server_side_connection(nursery: trio.Nursery) -> Connection:
    server = TrioRemotingServer(ServerConfig(write_buffer_high_water_mark=8 * 1024,
                                             write_buffer_low_water_mark=4 * 1024))
    install_standard_processors(server)
    await nursery.start(server.serve)
    client = TrioRemotingClient(ClientConfig())
    await nursery.start(client.serve)
    await client.invoke_sync(f"127.0.0.1:{server.port}",
                             RemotingCommand.create_request(ASYNC_ECHO), 5)
    [conn] = server.endpoint.connections
    return conn


async def one_race(conn: Connection, waiter: str) -> bool:
    """Task A queues past the high water mark and waits; task B, woken in the same batch,
    queues enough small frames for an early flush. True if A was left waiting."""
    go = trio.Event()
    done = trio.Event()
    big, small = orphan_frame(5000), orphan_frame(10)

    async def a() -> None:
        await go.wait()
        conn._direct_budget = 0  # as after the first write of a read
        conn.write_frame(big)
        conn.write_frame(big)  # two frames, over the 8 KiB high water mark
        if waiter == "drain":
            await conn.wait_writable()
        else:
            await conn.wait_flushed()
        done.set()

    async def b() -> None:  # e.g. pool results drained together, GO_AWAY replies
        await go.wait()
        for _ in range(14):  # the 16th queued frame triggers the early flush
            conn.write_frame(small)

    async with trio.open_nursery() as tasks:
        tasks.start_soon(a)
        tasks.start_soon(b)
        await trio.testing.wait_all_tasks_blocked()
        go.set()
        await trio.testing.wait_all_tasks_blocked()
        stranded = not done.is_set() and conn.queued_bytes == 0 and not conn._sending
        if not done.is_set():
            with trio.fail_after(5):  # let the trial end either way
                conn._drain_lot.unpark_all()
                conn._flush_lot.unpark_all()
                await done.wait()
    return stranded


async def test_an_early_flush_wakes_wait_writable(nursery: trio.Nursery) -> None:
    conn = await server_side_connection(nursery)
    stranded = [await one_race(conn, "drain") for _ in range(40)]
    assert not any(stranded), f"{sum(stranded)}/40 wait_writable waiters left parked"


async def test_an_early_flush_wakes_wait_flushed(nursery: trio.Nursery) -> None:
    conn = await server_side_connection(nursery)
    stranded = [await one_race(conn, "flushed") for _ in range(40)]
    assert not any(stranded), f"{sum(stranded)}/40 wait_flushed waiters left parked"
