"""Resource limits: connections per server and per IP, stalled partial frames, and requests
in progress per connection. None of them affects other connections."""

from __future__ import annotations

import threading
from contextlib import AsyncExitStack

import pytest
import trio

from codec import RemotingCommand, ResponseCode, encode_frame
from processors import AsyncEchoProcessor, RequestContext, RequestProcessor
from remoting import (
    ClientConfig,
    RemotingClient,
    RemotingServer,
    ServerConfig,
    TrioRemotingClient,
    TrioRemotingServer,
)

from ..logs import capture_logs

ECHO = 1


async def serve(nursery: trio.Nursery, **cfg: object) -> TrioRemotingServer:
    server = TrioRemotingServer(ServerConfig(**cfg))  # type: ignore[arg-type]
    server.register_processor(ECHO, AsyncEchoProcessor())
    await nursery.start(server.serve)
    return server


async def is_closed_by_server(stream: trio.SocketStream) -> bool:
    with trio.fail_after(5):
        try:
            return await stream.receive_some(10) == b""
        except trio.BrokenResourceError:
            return True


@pytest.mark.parametrize("limit", ["max_connections", "max_connections_per_ip"])
async def test_connections_beyond_the_limit_are_closed(nursery: trio.Nursery, limit: str
                                                       ) -> None:
    server = await serve(nursery, **{limit: 2})
    async with AsyncExitStack() as streams:  # closed on the way out, failed or not
        kept = [await streams.enter_async_context(
            await trio.open_tcp_stream("127.0.0.1", server.port))
            for _ in range(2)]
        with capture_logs() as logs:
            extra = await streams.enter_async_context(
                await trio.open_tcp_stream("127.0.0.1", server.port))
            assert await is_closed_by_server(extra)
        assert any(e["event"] == "connection.refused" and limit in e["reason"] for e in logs)
        # the admitted ones still work
        await kept[0].send_all(encode_frame(RemotingCommand.create_request(ECHO, body=b"k")))
        with trio.fail_after(5):
            assert await kept[0].receive_some(1000) != b""
    # slots are given back: a new connection is admitted again
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    with trio.fail_after(5):
        while server.statistics().admitted:
            await trio.testing.wait_all_tasks_blocked()
    assert (await client.invoke_sync(f"127.0.0.1:{server.port}",
                                     RemotingCommand.create_request(ECHO), 5)).code == 0


async def test_stalled_partial_frame_is_closed_and_others_are_unaffected(
    nursery: trio.Nursery,
) -> None:
    """Slowloris: half a frame, then silence (real clock, short timeout)."""
    server = await serve(nursery, partial_frame_timeout=0.3)
    frame = encode_frame(RemotingCommand.create_request(ECHO, body=b"x" * 100))
    client = TrioRemotingClient()
    await nursery.start(client.serve)
    slow = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with slow:
        with capture_logs() as logs:
            # timed from before the send: the server may read it (and start its timer) before
            # send_all returns to this task
            start = trio.current_time()
            await slow.send_all(frame[:20])
            ok = await client.invoke_sync(f"127.0.0.1:{server.port}",
                                          RemotingCommand.create_request(ECHO, body=b"fine"), 5)
            assert ok.body == b"fine"
            assert await is_closed_by_server(slow)
        elapsed = trio.current_time() - start
    assert elapsed >= 0.3  # wall-clock: a lower bound (the stall had its timeout)
    assert any(e["event"] == "connection.stalled" for e in logs)
    # an idle connection without a partial frame is not affected by this timeout
    assert client.statistics().connections == 1


def test_requests_in_progress_per_connection_are_bounded() -> None:
    """A connection with max_requests_per_connection in progress is not read further."""
    release = threading.Event()
    running = threading.Semaphore(0)
    concurrent = [0, 0]
    lock = threading.Lock()

    class Slow(RequestProcessor):
        def process_request(self, ctx: RequestContext, request: RemotingCommand
                            ) -> RemotingCommand:
            with lock:
                concurrent[0] += 1
                concurrent[1] = max(concurrent[1], concurrent[0])
            running.release()
            release.wait(10)
            with lock:
                concurrent[0] -= 1
            return RemotingCommand.create_response(ResponseCode.SUCCESS)

    with RemotingServer(ServerConfig(max_requests_per_connection=3)) as server, \
            RemotingClient(ClientConfig()) as client:
        server.register_processor(7, Slow(), threads=16)
        futures = [client.invoke_async(server.addr, RemotingCommand.create_request(7), 20)
                   for _ in range(12)]
        for _ in range(3):
            assert running.acquire(timeout=5)
        assert server.statistics().processing == 3  # the 4th is not even read yet
        release.set()
        assert all(f.result(10).code == ResponseCode.SUCCESS for f in futures)
    assert concurrent[1] == 3
