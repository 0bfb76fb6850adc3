"""A `Connection`'s sending half over a real socket, through its own API: whatever sends a
queue's frames (the writer, a direct send, an early flush) wakes whoever waits for room or for
the queue to empty. Found in review: the early flush left such waiters parked for good."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio
import trio.testing

from codec import RemotingCommand, ResponseCode, encode_frame_parts
from remoting import ServerConfig
from remoting._core._trio_driver._connection import Connection
from remoting._core._trio_driver._transport import transport_for
from remoting._observability._statistics import Counters

HIGH, LOW = 8 * 1024, 4 * 1024


class Owner:
    """A connection owner that only notes that the connection closed."""

    def __init__(self) -> None:
        self.closed = trio.Event()

    def request_received(self, conn: Connection, request: RemotingCommand) -> None:
        return None

    def response_received(self, conn: Connection, response: RemotingCommand) -> None:
        pass

    def read_done(self, conn: Connection) -> None:
        pass

    def reader_started(self) -> None:
        pass

    def connection_closed(self, conn: Connection) -> None:
        self.closed.set()


def frame(size: int) -> bytes:
    cmd = RemotingCommand.create_response(ResponseCode.SUCCESS)
    cmd.body = b"x" * size
    encoded = encode_frame_parts(cmd)
    assert isinstance(encoded, bytes)
    return encoded


async def sink(stream: trio.SocketStream) -> None:
    """A peer that reads everything and never answers."""
    while await stream.receive_some(1 << 16):
        pass


@asynccontextmanager
async def connection() -> AsyncIterator[Connection]:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, sink, 0, host="127.0.0.1"))
        stream = await trio.open_tcp_stream("127.0.0.1", listeners[0].socket.getsockname()[1])
        config = ServerConfig(write_buffer_high_water_mark=HIGH, write_buffer_low_water_mark=LOW)
        owner = Owner()
        conn = Connection(transport_for(stream), "peer", owner, config, Counters(), role="server")
        nursery.start_soon(conn.run)
        conn.send(frame(10))  # spends the one direct send: no read ever gives it back here
        yield conn
        conn.close()
        await owner.closed.wait()
        nursery.cancel_scope.cancel()


async def one_race(conn: Connection, waiter: str) -> None:
    """Task A queues past the high water mark and waits; task B, woken in the same batch,
    queues enough small frames for an early flush, which must wake A."""
    go = trio.Event()
    big, small = frame(5000), frame(10)

    async def a() -> None:
        await go.wait()
        conn.send(big)
        conn.send(big)  # two frames, over the 8 KiB high water mark
        await (conn.wait_writable() if waiter == "drain" else conn.wait_flushed())

    async def b() -> None:  # e.g. pool results drained together, GO_AWAY replies
        await go.wait()
        for _ in range(14):  # the 16th queued frame triggers the early flush
            conn.send(small)

    with trio.fail_after(5):
        async with trio.open_nursery() as tasks:
            tasks.start_soon(a)
            tasks.start_soon(b)
            await trio.testing.wait_all_tasks_blocked()
            go.set()


@pytest.mark.parametrize("waiter", ["drain", "flushed"])
async def test_an_early_flush_wakes_those_waiting_on_the_queue(waiter: str) -> None:
    async with connection() as conn:
        for _ in range(40):
            await one_race(conn, waiter)
        assert conn.queued_bytes == 0


async def test_a_closed_connection_refuses_frames_and_runs_their_callbacks() -> None:
    ran: list[str] = []
    async with connection() as conn:
        assert conn.send(frame(10), lambda: ran.append("sent"))
    assert not conn.send(frame(10), lambda: ran.append("never"))
    assert ran == ["sent"]
