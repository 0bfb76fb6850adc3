"""Peers that misbehave on purpose: each is bounded, and costs only its own connection."""

from __future__ import annotations

import trio
import trio.testing

from codec import RemotingCommand, ResponseCode, encode_frame
from remoting import (
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..factories import req
from ..logs import capture_logs
from .conftest import ASYNC_ECHO, addr_of, install_standard_processors


async def start_server(nursery: trio.Nursery, **config: object) -> TrioRemotingServer:
    server = TrioRemotingServer(ServerConfig(**config))  # type: ignore[arg-type]
    install_standard_processors(server)
    await nursery.start(server.serve)
    return server


async def closed_by_peer(stream: trio.SocketStream) -> bool:
    """Read until the peer closes (True) or resets; False if it is still open after 10 s."""
    with trio.move_on_after(10):
        try:
            while await stream.receive_some(1 << 16):
                pass
        except trio.BrokenResourceError:
            pass
        return True
    return False


async def test_a_frame_trickled_a_byte_at_a_time_is_bounded_as_a_whole(
    nursery: trio.Nursery,
) -> None:
    """The partial-frame timeout bounds the whole frame, not the gap between its bytes."""
    server = await start_server(nursery, partial_frame_timeout=0.5)
    frame = encode_frame(req(ASYNC_ECHO, b"x" * 100))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        with capture_logs() as logs:
            start = trio.current_time()

            async def trickle() -> None:
                for byte in frame:  # a byte every 0.1 s: every gap is well under the limit
                    await stream.send_all(bytes([byte]))
                    await trio.sleep(0.1)

            async with trio.open_nursery() as peer:
                peer.start_soon(trickle)
                assert await closed_by_peer(stream)
                peer.cancel_scope.cancel()
            elapsed = trio.current_time() - start
        # the whole frame had 0.5 s (it would take 13 s: a timeout per gap closes nothing)
        assert elapsed >= 0.5  # wall-clock: a lower bound (the frame had its 0.5 s)
        assert [e for e in logs if e["event"] == "connection.stalled"]
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    assert (await client.invoke_sync(addr_of(server), req(ASYNC_ECHO, b"ok"), 5)).body == b"ok"


async def test_a_flood_of_responses_nobody_asked_for_is_logged_sparingly_then_cut_off(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    orphan = RemotingCommand.create_response(ResponseCode.SUCCESS)
    frames = []
    for opaque in range(1_000_000, 1_010_000):  # 10,000 responses matching no call
        orphan.opaque = opaque
        frames.append(encode_frame(orphan))
    flood = b"".join(frames)
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    await client.invoke_sync(addr_of(server), req(ASYNC_ECHO), 5)  # a well-behaved neighbour
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        with capture_logs() as logs:
            try:
                await stream.send_all(flood)
            except trio.BrokenResourceError:  # cut off before all of it was taken
                pass
            assert await closed_by_peer(stream)
    orphaned = [e for e in logs if e["event"] == "response.orphaned"]
    assert 1 <= len(orphaned) <= 10  # a few lines (at 1, 2, 4, 8... of them), not 10,000
    assert [e for e in logs if e["event"] == "connection.misbehaving"]
    stats = server.statistics()
    assert 100 < stats.orphaned_responses < 10_000  # cut off after a bounded number
    # the neighbour is untouched
    assert (await client.invoke_sync(addr_of(server), req(ASYNC_ECHO, b"ok"), 5)).body == b"ok"
    assert client.statistics().connections_opened == 1


async def test_a_client_refused_by_a_connection_limit_is_told_the_limit_not_tls(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery, max_connections_per_ip=1)
    held = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with held:
        await held.send_all(encode_frame(req(ASYNC_ECHO)))
        assert await held.receive_some(1 << 16)  # admitted and served
        client = TrioRemotingClient()
        await nursery.start(client.serve)
        answer = await client.invoke_sync(addr_of(server), req(ASYNC_ECHO), 5)
    assert answer.code == ResponseCode.SYSTEM_BUSY
    assert answer.remark is not None and "(max_connections_per_ip)" in answer.remark
    assert "TLS" not in answer.remark
