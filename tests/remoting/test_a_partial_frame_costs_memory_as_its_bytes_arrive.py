"""What a partial frame makes the receiver commit grows with the bytes of it that arrived.

A valid 8-byte prefix announces up to ``max_frame_bytes`` (16 MiB). Committing a buffer of
the announced size at once let 8 bytes per connection pin 16 MiB each until the partial
frame timeout (docs/security.md, "Worst-case memory"). Allocations are measured with
tracemalloc (every buffer is a ``bytearray``, zero-filled, so allocated is committed), with
an empty buffer pool so that no buffer kept by earlier tests is borrowed.
"""

from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
import trio
import trio.testing

from codec import FrameDecoder, SerializeType, encode_frame
from remoting import TrioRemotingServer
from remoting._core._sansio import _connection_core, _receive_buffers
from remoting._core._sansio._receive_buffers import BufferPool

from ..factories import req
from .conftest import ASYNC_ECHO

MIB = 1 << 20
ANNOUNCED = 16 * MIB - 4  # the whole frame: just under the default max_frame_bytes
PREFIX = struct.pack(">iI", ANNOUNCED - 4, 16)  # length, JSON header of 16 bytes
CONNECTIONS = 8


@pytest.fixture(autouse=True)
def empty_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = BufferPool(16 * MIB)
    monkeypatch.setattr(_receive_buffers, "RECEIVE_BUFFERS", pool)
    monkeypatch.setattr(_connection_core, "RECEIVE_BUFFERS", pool)


async def read_by_server(server: TrioRemotingServer, total: int) -> None:
    """Wait until the server has received ``total`` bytes and is waiting for more."""
    while server.statistics().bytes_read < total:
        await trio.testing.wait_all_tasks_blocked()
    await trio.testing.wait_all_tasks_blocked()  # its readers are parked in their next read


async def allocated_by_sending(server: TrioRemotingServer, data: bytes) -> int:
    """Send ``data`` on each of `CONNECTIONS` connections; return the bytes allocated since."""
    streams = []
    try:
        for _ in range(CONNECTIONS):
            streams.append(await trio.open_tcp_stream("127.0.0.1", server.port))
        while server.statistics().connections < CONNECTIONS:
            await trio.testing.wait_all_tasks_blocked()
        before = server.statistics().bytes_read
        tracemalloc.start()
        try:
            start, _ = tracemalloc.get_traced_memory()
            for stream in streams:
                await stream.send_all(data)
            await read_by_server(server, before + CONNECTIONS * len(data))
            now, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        return now - start
    finally:
        for stream in streams:
            await stream.aclose()


async def test_prefixes_announcing_big_frames_commit_no_big_buffers(
    server: TrioRemotingServer,
) -> None:
    with trio.fail_after(20):
        grown = await allocated_by_sending(server, PREFIX)
    assert grown < CONNECTIONS * 64 * 1024, (
        f"{CONNECTIONS} connections sending 8 bytes each made the server allocate {grown} "
        f"bytes (each announced {ANNOUNCED})")


async def test_a_partial_frame_commits_a_few_times_the_bytes_it_sent(
    server: TrioRemotingServer,
) -> None:
    sent = PREFIX + bytes(16) + bytes(256 * 1024)  # the header, then some of the body
    with trio.fail_after(20):
        grown = await allocated_by_sending(server, sent)
    assert grown < CONNECTIONS * 8 * len(sent), (
        f"{CONNECTIONS} connections sending {len(sent)} bytes each made the server allocate "
        f"{grown} bytes (each announced {ANNOUNCED})")


@pytest.mark.parametrize("size", [3 * MIB + 7, 200_001])
async def test_a_frame_trickling_in_through_growing_buffers_arrives_byte_exact(
    server: TrioRemotingServer, size: int,
) -> None:
    body = random.Random(size).randbytes(size)
    frame = encode_frame(req(ASYNC_ECHO, body, SerializeType.ROCKETMQ))
    with trio.fail_after(30):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            before = server.statistics().bytes_read
            pos = 0
            for piece in (8, 5000, 40_000, 70_000, 150_000, 300_000, 1 << 40):
                chunk = frame[pos : pos + piece]  # each piece read apart: the buffer grows
                await stream.send_all(chunk)
                pos += len(chunk)
                await read_by_server(server, before + pos)
            decoder = FrameDecoder()
            while (response := decoder.next_command()) is None:
                data = await stream.receive_some(1 << 20)
                assert data, "the server closed the connection"
                decoder.feed(data)
    assert response.code == 0
    assert response.body == body
