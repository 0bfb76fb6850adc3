"""A request sent while a thread reads its connection is only queued (the reader sends it
after its next read); the first one queued also sets the background reader's timer, which
sends it a moment later at the latest. Setting that timer may wake the background reader (a
pipe write, which lets go of the GIL), so it happens outside the connection's mutex: threads
sending meanwhile would otherwise queue up on the mutex behind it."""

from __future__ import annotations

import threading

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._core._thread_driver import _thread_driver
from remoting._core._thread_driver._thread_connection import ThreadConnection

from ..factories import req

ECHO = 81
HELD = 82
WAIT = 5.0


class Echo(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Held(AsyncRequestProcessor):
    """Answers once released (from any thread)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered.set()
        await trio.to_thread.run_sync(self.release.wait, WAIT)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def test_the_first_request_queued_for_the_reader_sets_its_timer_without_the_mutex(
        monkeypatch: pytest.MonkeyPatch) -> None:
    held = Held()
    mutex_held: list[bool] = []
    flush_soon = _thread_driver.ThreadDriver.flush_soon

    def noted(driver: _thread_driver.ThreadDriver, conn: ThreadConnection) -> None:
        mutex_held.append(conn._mutex.locked())
        flush_soon(driver, conn)

    monkeypatch.setattr(_thread_driver.ThreadDriver, "flush_soon", noted)
    with RemotingServer() as server, RemotingClient(ClientConfig(io="threads")) as client:
        server.register_processor(ECHO, Echo())
        server.register_processor(HELD, held)
        assert client.invoke_sync(server.addr, req(ECHO, b"up"), WAIT).body == b"up"
        reader = threading.Thread(
            target=lambda: client.invoke_sync(server.addr, req(HELD), WAIT))
        reader.start()  # waits for its answer: it holds the read role meanwhile
        try:
            assert held.entered.wait(WAIT)
            # sent while that thread reads: queued for it, with the timer set
            fut = client.invoke_async(server.addr, req(ECHO, b"queued"), WAIT)
            assert fut.result(WAIT).body == b"queued"  # sent by the timer, or after a read
        finally:
            held.release.set()
            reader.join(WAIT)
    assert mutex_held and not any(mutex_held), "the timer was set under the mutex"
