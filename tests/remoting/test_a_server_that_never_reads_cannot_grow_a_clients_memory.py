"""A server that pushes requests to a client and never reads its answers.

A client's reader never pauses (it must take the responses that drain its server: both sides
pausing would deadlock), so without a bound its answers piled up in its outbound queue for as
long as the server pushed (150 MiB pushed made 320 MiB queued). Now a client drops, with no
answer, the requests that need one while its queue is over the high water mark, and keeps
taking responses meanwhile.
"""

from __future__ import annotations

import socket
import time

import trio
import trio.testing

from codec import FrameDecoder, RemotingCommand, ResponseCode, encode_frame
from processors import AsyncEchoProcessor
from remoting import ClientConfig, RemotingClient, TrioRemotingClient
from remoting._core._doors._threads import Inbox
from remoting._core._receiving._dispatch import Dispatcher, Refusal
from remoting._core._streams._streams import Streams
from remoting._observability._statistics import Counters

from ..factories import req
from ..logs import capture_logs

PUSHED = 7
HIGH = 256 * 1024
BODY = 64 * 1024


def test_a_client_drops_requests_that_need_an_answer_while_it_is_backlogged() -> None:
    d = Dispatcher("client", ClientConfig(), Counters(), Inbox(), owner=object(),
                   stream_opener=Streams(1 << 20).opener)
    d.register(PUSHED, AsyncEchoProcessor())
    assert not isinstance(d.route(req(PUSHED), backlogged=False), Refusal)
    dropped = d.route(req(PUSHED), backlogged=True)
    assert isinstance(dropped, Refusal) and dropped.reason == "unanswerable"
    assert d.route(req(99), backlogged=True) is dropped  # before any answer, even an error
    oneway = req(PUSHED)
    oneway.mark_oneway()
    assert not isinstance(d.route(oneway, backlogged=True), Refusal)  # no answer to queue


async def test_a_server_pushing_requests_and_never_reading_gets_no_more_than_the_mark(
    nursery: trio.Nursery,
) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # never reads
    port = listener.socket.getsockname()[1]
    client = TrioRemotingClient(ClientConfig(write_buffer_high_water_mark=HIGH,
                                             write_buffer_low_water_mark=HIGH // 4))
    client.register_processor(PUSHED, AsyncEchoProcessor())
    await nursery.start(client.serve)
    addr = f"127.0.0.1:{port}"
    own = req(50, b"own call")
    own.opaque = 424242
    async with listener:
        call = await client.invoke_async(addr, own, 30)  # the client's own call, pending
        server = await listener.accept()
    async with server:
        pushed = b"".join(encode_frame(req(PUSHED, b"p" * BODY)) for _ in range(256))  # 16 MiB
        with capture_logs() as logs:
            with trio.fail_after(20):
                await server.send_all(pushed)  # only returns once the client has read it all
                await trio.testing.wait_all_tasks_blocked()
            stats = client.statistics()
            # the answers the socket took (up to its buffer, a few MiB), then the mark, then
            # the answers to one read's worth of requests: not 16 MiB
            assert stats.queued_bytes <= HIGH + 2 * (BODY + 1024), stats.queued_bytes
            assert stats.requests_dropped > 100
            assert stats.requests_received[PUSHED] == 256
            answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
            answer.opaque = 424242
            with trio.fail_after(10):  # responses are still taken meanwhile
                await server.send_all(encode_frame(answer))
                await call.wait()
            assert call.response_command is not None
        dropped = [e for e in logs if e["event"] == "request.dropped"]
        assert 1 <= len(dropped) <= stats.requests_dropped.bit_length()  # 1, 2, 4, 8...

        # once the server reads again, the client answers again
        decoder = FrameDecoder()
        with trio.fail_after(20):
            while client.statistics().queued_bytes:
                decoder.feed(await server.receive_some(1 << 20))
        await server.send_all(encode_frame(req(PUSHED, b"again")))
        with trio.fail_after(10):
            while True:
                decoder.feed(await server.receive_some(1 << 20))
                answers = []
                while (cmd := decoder.next_command()) is not None:
                    answers.append(cmd)
                if any(a.body == b"again" for a in answers):
                    break


def test_a_blocking_client_pushed_to_by_a_server_that_never_reads_keeps_its_queue_bounded(
) -> None:
    """The same flood against `RemotingClient` (run once per ``io`` setting): a thread-driven
    client reads the pushes in whichever thread reads, and its loop answers them."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # never reads
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    client = RemotingClient(ClientConfig(write_buffer_high_water_mark=HIGH,
                                         write_buffer_low_water_mark=HIGH // 4))
    client.register_processor(PUSHED, AsyncEchoProcessor())
    client.start()
    try:
        own = req(50, b"own call")
        own.opaque = 424242
        call = client.invoke_async(addr, own, 30)
        server, _ = listener.accept()
        with server, capture_logs() as logs:
            server.settimeout(20)
            server.sendall(b"".join(encode_frame(req(PUSHED, b"p" * BODY))
                                    for _ in range(256)))  # 16 MiB, all read by the client
            deadline = time.monotonic() + 20
            while (client.statistics().requests_received.get(PUSHED, 0) < 256
                   and time.monotonic() < deadline):
                time.sleep(0.01)
            time.sleep(0.1)  # the last answers queued
            stats = client.statistics()
            assert stats.requests_received[PUSHED] == 256
            assert stats.queued_bytes <= HIGH + 2 * (BODY + 1024), stats.queued_bytes
            assert stats.requests_dropped > 100
            answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
            answer.opaque = 424242
            server.sendall(encode_frame(answer))  # responses are still taken meanwhile
            assert call.result(10).opaque == 424242
            assert any(e["event"] == "request.dropped" for e in logs)
    finally:
        client.shutdown()
        listener.close()
