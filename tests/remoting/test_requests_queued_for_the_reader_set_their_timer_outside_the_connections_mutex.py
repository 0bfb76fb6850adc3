"""A request sent while a thread reads its connection is only queued (the reader sends it
after its next read); if that reader waits in ``poll`` meanwhile, the first one queued also
sets the background reader's timer, which sends it a moment later at the latest. Setting that
timer may wake the background reader (a pipe write, which lets go of the GIL), so it happens
outside the connection's mutex: threads sending meanwhile would otherwise queue up on the
mutex behind it. A reader that is not waiting looks at what was queued for it before it waits
again, or as it leaves: a request queued then sets no timer and still leaves."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import trio

from codec import RemotingCommand, ResponseCode
from processors import AsyncRequestProcessor, RequestContext
from remoting import ClientConfig, RemotingClient, RemotingServer
from remoting._core._thread_driver import _thread_driver
from remoting._core._thread_driver._thread_connection import ThreadConnection
from remoting._faces._client_io import ThreadsIO

from ..factories import req

ECHO = 81
HELD = 82
GATED = 83
WAIT = 5.0


class Echo(AsyncRequestProcessor):
    """Echoes the body; notes when the body it watches for arrives."""

    def __init__(self, watch: bytes = b"") -> None:
        self.watch = watch
        self.seen = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        if request.body == self.watch:
            self.seen.set()
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Held(AsyncRequestProcessor):
    """Answers once released (from any thread)."""

    def __init__(self, hold: float = WAIT) -> None:
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered.set()
        await trio.to_thread.run_sync(self.release.wait, self.hold)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each time the background reader's timer is asked for: whether the connection's mutex
    was held then."""
    asked: list[bool] = []
    flush_soon = _thread_driver.ThreadDriver.flush_soon

    def noted(driver: _thread_driver.ThreadDriver, conn: ThreadConnection) -> None:
        asked.append(conn._mutex.locked())
        flush_soon(driver, conn)

    monkeypatch.setattr(_thread_driver.ThreadDriver, "flush_soon", noted)
    return asked


def test_the_first_request_queued_for_the_reader_sets_its_timer_without_the_mutex(
        timers: list[bool]) -> None:
    held = Held()
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
    assert timers and not any(timers), "the timer was set under the mutex"



class Gated(AsyncRequestProcessor):
    """Answers once opened (from any thread)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        self.entered.set()
        await trio.to_thread.run_sync(self.open.wait, WAIT)
        return RemotingCommand.create_response(ResponseCode.SUCCESS)


def _only_connection(client: RemotingClient) -> ThreadConnection:
    assert isinstance(client._io, ThreadsIO)
    (conn,) = client._io.driver.live_connections()
    return conn


@pytest.mark.parametrize("busy_in", ["_receive", "_read_once"])
def test_a_request_queued_while_the_reader_is_busy_sets_no_timer_and_still_leaves(
        monkeypatch: pytest.MonkeyPatch, timers: list[bool], busy_in: str) -> None:
    """Queued while the reader holds the role between its poll and its handing over of what
    it read (``_receive``: it sends it after that read), or once it read its own answer and
    before it gives the role up (``_read_once``: it sends it as it leaves); another call (a
    held one) is in flight meanwhile, so the request is queued for the reader."""
    busy = getattr(ThreadConnection, busy_in)
    read_before: list[int] = []
    reading = threading.Event()
    queued = threading.Event()

    def held_up(conn: ThreadConnection, *args: Any) -> Any:
        result = busy(conn, *args)
        if read_before and conn.bytes_read + (result or 0) > read_before[0]:
            read_before.clear()
            reading.set()  # the reader holds the role and is not waiting in poll
            queued.wait(WAIT)
        return result

    monkeypatch.setattr(ThreadConnection, busy_in, held_up)
    held, gated, echo = Held(hold=12 * WAIT), Gated(), Echo(watch=b"queued")
    answers: list[RemotingCommand] = []
    with RemotingServer() as server, RemotingClient(ClientConfig(io="threads")) as client:
        server.register_processor(ECHO, echo)
        server.register_processor(HELD, held)
        server.register_processor(GATED, gated)
        assert client.invoke_sync(server.addr, req(ECHO, b"up"), WAIT).body == b"up"
        conn = _only_connection(client)
        reader = threading.Thread(target=lambda: answers.append(
            client.invoke_sync(server.addr, req(GATED), WAIT)))
        reader.start()  # it reads its connection until the gate opens
        try:
            assert gated.entered.wait(WAIT)
            pending = client.invoke_async(server.addr, req(HELD), 12 * WAIT)
            assert held.entered.wait(WAIT)  # (sent by the timer, the reader waiting in poll)
            read_before.append(conn.bytes_read)
            gated.open.set()
            assert reading.wait(WAIT)
            timers.clear()
            fut = client.invoke_async(server.addr, req(ECHO, b"queued"), WAIT)
            assert conn.sender.deferred, "not queued for the reader"
            assert conn.reading and not conn.reader_polling
            assert timers == [], "a timer was set for a reader that looks before it waits"
            queued.set()
            reader.join(WAIT)
            # it left before anyone else read the connection (the held call's answer, the
            # next thing to read there, is a minute away)
            assert echo.seen.wait(WAIT), "the reader left it queued"
            assert [a.code for a in answers] == [ResponseCode.SUCCESS]
            assert fut.result(WAIT).body == b"queued"
        finally:
            queued.set()
            held.release.set()
            reader.join(WAIT)
        assert pending.result(WAIT).code == ResponseCode.SUCCESS


def test_a_request_queued_between_two_reads_leaves_before_the_reader_waits_again(
        monkeypatch: pytest.MonkeyPatch, timers: list[bool]) -> None:
    """The reader read another call's answer and still waits for its own (a held one): a
    request queued right after that read sets no timer, and the reader sends it before it
    waits in poll again (else it would wait there with the request, and nothing would send
    it until an answer came)."""
    read_once = ThreadConnection._read_once
    read_before: list[int] = []
    reading = threading.Event()
    queued = threading.Event()

    def held_up(conn: ThreadConnection, until: float) -> None:
        read_once(conn, until)
        if read_before and conn.bytes_read > read_before[0]:
            read_before.clear()
            reading.set()  # it read the other answer; its own call still waits
            queued.wait(WAIT)

    monkeypatch.setattr(ThreadConnection, "_read_once", held_up)
    gated = Gated()
    with RemotingServer() as server, RemotingClient(ClientConfig(io="threads")) as client:
        server.register_processor(ECHO, Echo())
        server.register_processor(GATED, gated)
        assert client.invoke_sync(server.addr, req(ECHO, b"up"), WAIT).body == b"up"
        conn = _only_connection(client)
        reader = threading.Thread(target=client.invoke_sync,
                                  args=(server.addr, req(GATED), WAIT))
        reader.start()  # it reads its connection until the gate opens
        try:
            assert gated.entered.wait(WAIT)
            read_before.append(conn.bytes_read)
            first = client.invoke_async(server.addr, req(ECHO, b"first"), WAIT)
            assert reading.wait(WAIT)
            assert first.done()
            timers.clear()
            fut = client.invoke_async(server.addr, req(ECHO, b"queued"), WAIT)
            assert conn.sender.deferred and not conn.reader_polling
            queued.set()
            # answered while the gate is still closed: the reader sent it before waiting
            assert fut.result(WAIT).body == b"queued"
            assert timers == []
        finally:
            queued.set()
            gated.open.set()
            reader.join(WAIT)
