"""What arrives while no calling thread waits is still read: the server's requests to a
client with processors, the answer to an async call whose thread never calls again (its
callback runs, once, on the callback executor). On ``io="threads"`` the background reader
reads them (the idle sweep is slowed down here, so it is not what reads them); on
``io="loop"`` the loop does."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import trio

from codec import RemotingCommand, ResponseCode, encode_frame
from processors import AsyncRequestProcessor, EchoProcessor, RequestContext, RequestProcessor
from remoting import ChannelHandle, RemotingClient, RemotingServer, ResponseFuture
from remoting._core._thread_driver import _thread_driver

from ..factories import req

ECHO = 71
PUSH = 72
DELAYED = 73


class Delayed(AsyncRequestProcessor):
    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand:
        await trio.sleep(0.2)
        response = RemotingCommand.create_response(ResponseCode.SUCCESS)
        response.body = request.body
        return response


class Noted(RequestProcessor):
    """Notes the oneway pushes it got."""

    def __init__(self) -> None:
        self.got = threading.Event()

    def process_request(self, ctx: RequestContext, request: RemotingCommand) -> None:
        self.got.set()
        return None


@pytest.fixture(autouse=True)
def no_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_thread_driver, "SWEEP_SECONDS", 60.0)


@pytest.fixture
def server() -> Iterator[RemotingServer]:
    server = RemotingServer()
    server.register_processor(ECHO, EchoProcessor())
    server.register_processor(DELAYED, Delayed())
    with server:
        yield server


@pytest.mark.parametrize("registered", ["before the connection", "after it"])
def test_a_server_push_is_answered_while_no_call_waits(server: RemotingServer,
                                                       registered: str) -> None:
    client = RemotingClient()
    if registered == "before the connection":
        client.register_processor(PUSH, EchoProcessor())
    with client:
        client.invoke_sync(server.addr, req(ECHO), 5)  # the connection, then no call
        if registered == "after it":
            client.register_processor(PUSH, EchoProcessor())
        [channel] = server.channels()
        answer = server.invoke_sync(channel, req(PUSH, b"pushed"), 5)
    assert answer.code == ResponseCode.SUCCESS
    assert answer.body == b"pushed"


def test_a_oneway_push_is_processed_while_no_call_waits(server: RemotingServer) -> None:
    noted = Noted()
    with RemotingClient() as client:
        client.register_processor(PUSH, noted)
        client.invoke_sync(server.addr, req(ECHO), 5)
        [channel] = server.channels()
        server.invoke_oneway(channel, req(PUSH))
        assert noted.got.wait(5)


def test_the_callback_of_a_thread_that_never_calls_again_runs_once(
        server: RemotingServer) -> None:
    ran: list[str] = []
    done = threading.Event()

    def callback(fut: ResponseFuture) -> None:
        ran.append(threading.current_thread().name)
        assert fut.result(0).body == b"later"
        done.set()

    with RemotingClient() as client:
        client.invoke_sync(server.addr, req(ECHO), 5)
        caller = threading.Thread(target=lambda: client.invoke_async(
            server.addr, req(DELAYED, b"later"), 5, callback))
        caller.start()
        caller.join(5)  # the calling thread is gone before the answer comes
        assert not caller.is_alive()
        assert done.wait(5)
        assert client.statistics().in_flight == 0
    assert len(ran) == 1
    assert ran[0].startswith("remoting-client-callback")


class Remembers:
    """A channel event listener that keeps the channels it saw connect."""

    def __init__(self) -> None:
        self.connected: list[ChannelHandle] = []
        self.connect = threading.Event()
        self.closed = threading.Event()

    def on_channel_connect(self, remote_addr: str, channel: ChannelHandle) -> None:
        self.connected.append(channel)
        self.connect.set()

    def on_channel_close(self, remote_addr: str, channel: ChannelHandle) -> None:
        self.closed.set()

    def on_channel_exception(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass

    def on_channel_idle(self, remote_addr: str, channel: ChannelHandle) -> None:
        pass


def test_an_application_thread_closes_a_client_channel(server: RemotingServer) -> None:
    listener = Remembers()
    with RemotingClient() as client:
        client.register_channel_event_listener(listener)
        client.invoke_sync(server.addr, req(ECHO), 5)
        assert listener.connect.wait(5)  # delivered on the event thread
        [channel] = listener.connected
        channel.close()
        assert listener.closed.wait(5)
        assert not channel.is_active
        assert client.invoke_sync(server.addr, req(ECHO, b"again"), 5).body == b"again"
        assert client.statistics().connections_opened == 2


class InOrder(AsyncRequestProcessor):
    """Notes the order the pushes run in (their first step, as a reader runs it)."""

    def __init__(self, expected: int) -> None:
        self.ran: list[int] = []
        self.expected = expected
        self.all_ran = threading.Event()

    async def process_request(self, ctx: RequestContext, request: RemotingCommand
                              ) -> RemotingCommand | None:
        self.ran.append(int(request.body or b"0"))
        if len(self.ran) == self.expected:
            self.all_ran.set()
        return None


def test_a_connections_pushes_run_in_the_order_they_came() -> None:
    """The server's requests on one connection run in order, as a trio connection's reader
    runs them (a stream's items depend on it), however the reading threads cut them into
    reads and however the loop schedules the tasks that dispatch them."""
    pushes = 3000
    processor = InOrder(pushes)
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    with listener, RemotingClient() as client:
        client.register_processor(PUSH, processor)
        call = client.invoke_async(addr, req(ECHO), 10)
        server, _ = listener.accept()
        with server:
            for i in range(pushes):
                push = req(PUSH, str(i).encode())
                push.mark_oneway()
                server.sendall(encode_frame(push))
                if i % 7 == 0:
                    time.sleep(0)  # let the client read in pieces of every size
            assert processor.all_ran.wait(20)
            answer = RemotingCommand.create_response(ResponseCode.SUCCESS)
            answer.opaque = call.opaque
            server.sendall(encode_frame(answer))
            call.result(10)
    assert processor.ran == list(range(pushes))
