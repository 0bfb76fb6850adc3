"""Async processors run each in a task of its own, and still begin in the order their
requests were read: a task per request started at once would not (trio may run the tasks of
one scheduling batch in reverse), so each task starts the next only as it begins. Work of a
connection closed before its task took it is dropped, and counted done."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import trio
import trio.lowlevel

from codec import FrameDecoder, RemotingCommand, ResponseCode, encode_frame
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, RemotingClient, TrioRemotingServer
from remoting._core._receiving import _first_step

from ..factories import req


@pytest.fixture(autouse=True, params=["first step in the reader", "a task per request"])
def async_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs both ways an async processor may run: its first step in the reader
    (the shortcut), and the public path a trio that broke the shortcut falls back to."""
    if request.param == "a task per request":
        monkeypatch.setattr(_first_step.SelfCheck, "usable", False)


RECORDED = 81
ROUNDS = 6
BURST = 40


class Recorder(AsyncRequestProcessor):
    """Notes each request's body as its processor begins; every third one suspends first."""

    def __init__(self, expected: int = 0) -> None:
        self.began: list[bytes] = []
        self.all_began = threading.Event()
        self.expected = expected

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        assert request.body is not None
        self.began.append(request.body)
        if len(self.began) == self.expected:
            self.all_began.set()
        if int(request.body) % 3 == 0:
            await trio.lowlevel.checkpoint()
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


async def test_a_burst_read_at_once_begins_in_the_order_it_was_sent(
    server: TrioRemotingServer,
) -> None:
    recorder = Recorder()
    server.register_processor(RECORDED, recorder)
    sent: list[bytes] = []
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        decoder = FrameDecoder()
        for r in range(ROUNDS):
            bodies = [b"%d" % (r * BURST + i) for i in range(BURST)]
            sent += bodies
            await stream.send_all(b"".join(encode_frame(req(RECORDED, b)) for b in bodies))
            answered = 0
            with trio.fail_after(10):
                while answered < BURST:
                    decoder.feed(await stream.receive_some(1 << 16))
                    while (cmd := decoder.next_command()) is not None:
                        assert cmd.code == ResponseCode.SUCCESS
                        answered += 1
    assert recorder.began == sent


def test_a_thread_driven_clients_async_pushes_begin_in_the_order_they_came() -> None:
    pushes = 600
    recorder = Recorder(expected=pushes)
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    with listener, RemotingClient(ClientConfig(io="threads")) as client:
        client.register_processor(RECORDED, recorder)
        call = client.invoke_async(addr, req(1), 10)
        server, _ = listener.accept()
        with server:
            for i in range(pushes):
                push = req(RECORDED, b"%d" % i)
                push.mark_oneway()
                server.sendall(encode_frame(push))
                if i % 7 == 0:
                    time.sleep(0)  # let the client read in pieces of every size
            assert recorder.all_began.wait(20)
            answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
            answer.opaque = call.opaque
            server.sendall(encode_frame(answer))
            call.result(10)
    assert recorder.began == [b"%d" % i for i in range(pushes)]
