"""Once a connection is closed for misbehaving, the rest of what it sent is not decoded.

A peer's 101st response matching no call closes its connection; the rest of the same read
was still decoded, each later orphan logging its own ``connection.misbehaving`` warning
(10,895 of them for 5 x 64 KiB), and a request after them was still processed.
"""

from __future__ import annotations

import contextlib
import socket
import time

import pytest
import trio

from codec import RemotingCommand, ResponseCode, encode_frame
from processors import AsyncEchoProcessor, RequestContext
from remoting import RemotingClient, RemotingSendRequestError, TrioRemotingServer

from ..factories import req
from ..logs import capture_logs
from .conftest import ASYNC_ECHO, ECHO


def orphans(nbytes: int) -> bytes:
    """Responses matching no call, about ``nbytes`` of them."""
    orphan = RemotingCommand.create_response(ResponseCode.SUCCESS)
    frames = []
    size = 0
    opaque = 1_000_000
    while size < nbytes:
        orphan.opaque = opaque
        frames.append(encode_frame(orphan))
        size += len(frames[-1])
        opaque += 1
    return b"".join(frames)


async def test_a_flood_of_orphans_in_one_read_logs_one_close_and_runs_nothing_after(
    server: TrioRemotingServer,
) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    # one send: 5 x 64 KiB of orphans (thousands), then two requests that must not run
    data = orphans(5 * 64 * 1024) + encode_frame(req(ASYNC_ECHO)) + encode_frame(req(ECHO))
    async with stream:
        with capture_logs() as logs:
            try:
                await stream.send_all(data)
            except trio.BrokenResourceError:  # cut off before all of it was taken
                pass
            received = b""
            with trio.fail_after(10):
                try:
                    while chunk := await stream.receive_some(1 << 16):
                        received += chunk
                except trio.BrokenResourceError:
                    pass
            await trio.testing.wait_all_tasks_blocked()
    assert received == b""  # nothing was answered
    events = [e["event"] for e in logs]
    assert events.count("connection.misbehaving") == 1
    assert events.count("connection.closed") == 1
    assert events.count("response.orphaned") <= 8  # the 1st, 2nd, 4th... 64th
    warnings = [e for e in logs if e["log_level"] in ("warning", "error")]
    assert len(warnings) <= 10
    stats = server.statistics()
    assert stats.orphaned_responses == 101  # decoding stopped at the one that condemned it
    assert ASYNC_ECHO not in stats.requests_received
    assert ECHO not in stats.requests_received


def test_a_blocking_client_condemns_its_server_once_and_runs_nothing_after() -> None:
    """The same flood from a server to `RemotingClient` (once per ``io`` setting): with
    ``io="threads"`` the thread reading decodes the read, and hands nothing more over once
    the orphans closed the connection."""
    ran: list[RemotingCommand] = []

    class Recording(AsyncEchoProcessor):
        async def process_request(self, ctx: RequestContext, request: RemotingCommand
                                  ) -> RemotingCommand:
            ran.append(request)
            return await super().process_request(ctx, request)

    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    with listener, RemotingClient() as client, capture_logs() as logs:
        client.register_processor(ASYNC_ECHO, Recording())
        call = client.invoke_async(addr, req(ECHO), 10)
        server, _ = listener.accept()
        with server:
            server.settimeout(10)
            # ~150 orphans and a request, in one read
            data = orphans(16 * 1024) + encode_frame(req(ASYNC_ECHO))
            with contextlib.suppress(OSError):  # cut off before all of it was taken
                server.sendall(data)
            with pytest.raises(RemotingSendRequestError, match="matched no call"):
                call.result(10)
        time.sleep(0.2)  # what a request handed over would take to run
        stats = client.statistics()
    events = [e["event"] for e in logs]
    assert events.count("connection.misbehaving") == 1
    assert stats.orphaned_responses == 101  # nothing after the one that condemned it
    assert ran == []
