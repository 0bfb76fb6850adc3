"""Once a connection is closed for misbehaving, the rest of what it sent is not decoded.

A peer's 101st response matching no call closes its connection; the rest of the same read
was still decoded, each later orphan logging its own ``connection.misbehaving`` warning
(10,895 of them for 5 x 64 KiB), and a request after them was still processed.
"""

from __future__ import annotations

import trio

from codec import RemotingCommand, ResponseCode, encode_frame
from remoting import TrioRemotingServer

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
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)  # type: ignore[arg-type]
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
