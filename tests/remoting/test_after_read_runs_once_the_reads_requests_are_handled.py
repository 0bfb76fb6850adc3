"""`Endpoint.after_read`: what an async processor asks to run after the read it is handled
in runs once the read's other requests were handled, before the loop goes on; asked outside
a read (a task of the loop, another thread) it runs soon, through the inbox."""

from __future__ import annotations

import threading

import trio

from codec import RemotingCommand, encode_command
from processors import AsyncRequestProcessor, RequestContext
from remoting import TrioRemotingServer

RECORD = 3901
READ_REQUESTS = 3
WAIT = 10.0


class Recording(AsyncRequestProcessor):
    """Records each request's body, and asks the endpoint to record ``after:<body>`` once
    the read ends (whether it ran then: ``in_read``)."""

    def __init__(self, server: TrioRemotingServer) -> None:
        self.server = server
        self.events: list[str] = []
        self.in_read: list[bool] = []
        self.all_after = trio.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        body = (request.body or b"").decode()
        self.events.append(body)
        self.in_read.append(self.server.endpoint.dispatcher.after_read(
            lambda: self._after(body)))

    def _after(self, body: str) -> None:
        self.events.append(f"after:{body}")
        if sum(event.startswith("after:") for event in self.events) == READ_REQUESTS:
            self.all_after.set()


async def test_after_read_runs_after_every_request_of_the_read(
        server: TrioRemotingServer) -> None:
    recording = Recording(server)
    server.register_processor(RECORD, recording)
    requests = []
    for i in range(READ_REQUESTS):
        request = RemotingCommand.create_request(RECORD, body=b"%d" % i)
        request.mark_oneway()
        requests.append(encode_command(request))
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    try:
        await stream.send_all(b"".join(requests))  # one write: one read on loopback
        with trio.fail_after(WAIT):
            await recording.all_after.wait()
    finally:
        await stream.aclose()
    assert recording.in_read == [True] * READ_REQUESTS
    assert recording.events == ["0", "1", "2", "after:0", "after:1", "after:2"]


async def test_after_read_outside_a_read_runs_soon(server: TrioRemotingServer) -> None:
    endpoint = server.endpoint
    ran: list[str] = []
    done = trio.Event()

    def record(where: str) -> None:
        ran.append(where)
        if len(ran) == 2:
            done.set()

    # a task of the loop: no read is being handled
    assert not endpoint.dispatcher.after_read(lambda: None)
    assert endpoint.after_read(lambda: record("task"))
    assert ran == []  # not at once: soon
    thread = threading.Thread(target=lambda: endpoint.after_read(lambda: record("thread")))
    thread.start()
    thread.join()  # it only posted: the loop runs it
    with trio.fail_after(WAIT):
        await done.wait()
    assert sorted(ran) == ["task", "thread"]
