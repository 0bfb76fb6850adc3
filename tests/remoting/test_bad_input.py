"""A peer sending bad bytes loses its own connection, and nothing else."""

from __future__ import annotations

import struct

import pytest
import trio

from codec import RemotingCommand, encode_frame
from remoting import TrioRemotingClient, TrioRemotingServer

from ..logs import capture_logs
from .conftest import ASYNC_ECHO, GATED_ASYNC, AsyncGate, addr_of

GARBAGE = {
    "negative length": struct.pack(">i", -5) + b"\x00" * 8,
    "header longer than frame": struct.pack(">iI", 10, 300) + b"\x00" * 6,
    "unknown serialize type": struct.pack(">iI", 8, (7 << 24) | 2) + b"{}" + b"xx",
    "bad json": struct.pack(">iI", 7, 3) + b"{x!",
    "tls hello": bytes.fromhex("1603010200010001fc0303") + b"\x00" * 20,
    "http/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "http/1": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
async def test_garbage_closes_only_that_connection(
    server: TrioRemotingServer, client: TrioRemotingClient, name: str,
) -> None:
    gate = AsyncGate()
    server.register_processor(GATED_ASYNC, gate)
    # an innocent client with a request in flight
    pending = await client.invoke_async(addr_of(server), RemotingCommand.create_request(
        GATED_ASYNC), timeout=10)
    with capture_logs() as logs:
        bad = await trio.open_tcp_stream("127.0.0.1", server.port)
        await bad.send_all(GARBAGE[name])
        with trio.fail_after(5):
            assert await bad.receive_some(100) == b""  # the server closed it
        await bad.aclose()
    broken = [e for e in logs if e["event"] == "connection.broken"]
    assert len(broken) == 1
    if name in ("tls hello", "http/2 preface", "http/1"):
        assert broken[0]["protocol"] in ("TLS", "HTTP/2", "HTTP/1")
    gate.event.set()
    assert (await pending.wait()).code == 0
    ok = await client.invoke_sync(addr_of(server), RemotingCommand.create_request(
        ASYNC_ECHO, body=b"still here"), timeout=5)
    assert ok.body == b"still here"
    assert server.statistics().connections == 1


async def test_oversize_frame_is_refused_before_the_body_arrives(
    server: TrioRemotingServer,
) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    await stream.send_all(struct.pack(">i", 64 * 1024 * 1024))  # announce 64 MiB, send none
    with trio.fail_after(5):
        assert await stream.receive_some(10) == b""
    await stream.aclose()


async def test_byte_at_a_time_request_is_answered(server: TrioRemotingServer) -> None:
    frame = encode_frame(RemotingCommand.create_request(ASYNC_ECHO, body=b"slow"))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    for i in range(len(frame)):
        await stream.send_all(frame[i : i + 1])
    from codec import FrameDecoder

    decoder = FrameDecoder()
    with trio.fail_after(5):
        while (cmd := decoder.next_command()) is None:
            decoder.feed(await stream.receive_some(1000))
    assert cmd.body == b"slow"
    await stream.aclose()
